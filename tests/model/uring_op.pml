/* SPIN model of a send in flight on the io_uring completion backend
 * (completion_send and complete_op in sched/uring_io.cpp) against close(),
 * a deadline and a spurious readiness notification.
 *
 * Processes:
 *  - the sender: publishes itself in the write readiness word (CAS 0 -> ME;
 *    a READY found there is dropped first), queues the send SQE (from then
 *    on the kernel may read its buffer), and loops until the send's last
 *    completion: re-publishes itself if a notifier replaced it with READY,
 *    looks at `closing` (and, with TIMED, at its deadline), sends a cancel
 *    once if either says stop, parks. Then it leaves the word and returns —
 *    its buffer may be freed from here on.
 *  - the kernel: the send completes when the peer makes room (the peer may
 *    never do so) or when a cancel arrives first; completing, it reads the
 *    buffer, then posts the completion.
 *  - the reaper: on the completion, sets done and unparks the sender.
 *  - the closer: sets closing, then notifies the word (close_io).
 *  - with NOTIFIER, a readiness poll that notifies the word once (a POLLOUT
 *    edge, or an interrupt() on another path).
 *  - the peer: makes room, or never does.
 * Each statement is atomic, as the implementation's RMWs and loads are.
 *
 * Checked:
 *  - the kernel never reads the buffer after the sender returned (the
 *    buffer is the sender's, on its stack or freed by its caller);
 *  - no lost wake-up: every process ends (valid end state), so a sender
 *    whose peer never reads is still woken by close() and returns;
 *  - the sender never stays published in the word after it returns.
 * Mutations that must be caught (run_model.sh):
 *  -DRETURN_ON_CLOSE  the sender returns as soon as it sees the close,
 *                     without waiting for the send's completion;
 *  -DNO_REPUBLISH     the sender does not publish itself again after a
 *                     notifier replaced it with READY: the close's
 *                     notification then wakes nobody.
 */
#define READY 1
#define ME 2

byte word = 0;     /* 0, READY, or ME: the sender is published */
bit closing = 0;
bit permit = 0;    /* the sender's park permit */
bit queued = 0;    /* the SQE is in the ring */
bit cancel = 0;    /* a cancel SQE is in the ring */
bit room = 0;      /* the peer made room */
bit cqe = 0;       /* the send's completion is posted */
bit done = 0;      /* the reaper saw it */
bit returned = 0;  /* the sender returned: its buffer may be gone */

inline notify() {
  atomic {
    if
    :: word == ME -> permit = 1
    :: else -> skip
    fi;
    word = READY
  }
}

active proctype sender() {
  bit cancel_sent = 0;
  bit timed_out = 0;
  /* publish (a READY there is dropped first: the send does not need it) */
  do
  :: atomic { word == READY -> word = 0 }
  :: atomic { word == 0 -> word = ME }; break
  od;
  if
  :: closing -> goto leave   /* stop_reason before queueing: nothing in flight */
  :: else -> queued = 1
  fi;
loop:
  if
  :: done -> goto leave
  :: else -> skip
  fi;
#ifndef NO_REPUBLISH
  atomic { if :: word == READY -> word = ME :: else -> skip fi };
#endif
#ifdef RETURN_ON_CLOSE
  if
  :: closing -> goto leave
  :: else -> skip
  fi;
#endif
  if
  :: (closing || timed_out) && !cancel_sent -> cancel_sent = 1; cancel = 1; goto loop
  :: else -> skip
  fi;
  /* park (with TIMED and no cancel yet: park_until, which may time out) */
  if
  :: atomic { permit -> permit = 0 }
#ifdef TIMED
  :: !cancel_sent && !timed_out -> timed_out = 1
#endif
  fi;
  goto loop;
leave:
  atomic { if :: word == ME -> word = 0 :: word == READY -> word = 0 :: else -> skip fi };
  returned = 1;
  assert(word != ME)
}

active proctype kernel() {
end_idle:
  queued;   /* a sender that stopped before queueing leaves nothing in flight */
end_in_flight:
  if
  :: atomic { room -> assert(!returned) };  /* reads the buffer, then completes */
     cqe = 1
  :: cancel -> cqe = 1   /* cancelled before it ran: the buffer is never read */
  fi
}

active proctype reaper() {
end_idle:
  cqe;
  done = 1;
  permit = 1   /* unpark(who): type-stable, harmless if late */
}

active proctype closer() {
  closing = 1;
  notify()
}

#ifdef NOTIFIER
active proctype notifier() {
  notify()
}
#endif

active proctype peer() {
  if
  :: room = 1
  :: skip   /* never reads */
  fi
}
