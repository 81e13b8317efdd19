/* SPIN model of counting_semaphore's admission::barging box office
 * (include/tessera/detail/barging_semaphore.h, sync/semaphore.cpp): the word
 * (count, QUEUED, WOKEN), barging acquisition, the queue of parked callers under
 * its spin lock kept oldest first (a woken waiter that loses goes back by age),
 * release's fast path and settle(): the fair hand-off, a due waiter held back
 * by the rate limit staying queued while the next ones are woken, waking as
 * many waiters as permits are free (at most KB at once), and the chain wake of
 * a woken waiter that wins while permits remain; timed withdrawal.
 *
 * Processes: NP acquirers (2 or 3), R rounds each of acquire + release(1); the
 * last uses try_acquire_until and may time out wherever the code checks its
 * deadline. INIT permits at the start, and a releaser that adds RELS more one
 * release(1) at a time (so that two waiters can be queued while permits come:
 * the chain wake's case). With -DKEEP the acquirers keep their permits
 * (consumers of what the releaser produces): then no later release of theirs
 * can make up for a missed wake-up. Whether settle finds the oldest waiter
 * not due, due and handed a permit, or due and held back, whether a release
 * with a wake-up in flight takes the slow path anyway (the 256-release budget),
 * and when deadlines pass are left to the model checker: every choice is
 * explored. Each atomic block is one RMW (or a CAS loop's successful CAS) of
 * the implementation.
 *
 * Checked:
 *  - never more holders than permits (INIT + RELS);
 *  - no lost wake-up: every process terminates (invalid end states);
 *  - at the end: count + permits kept == INIT + RELS, QUEUED and WOKEN clear,
 *    queue empty.
 * Mutations that must be caught (run_model.sh): -DNO_CHAIN_WAKE (a woken
 * waiter that wins leaves the other free permits to the next release) and
 * -DHELD_BACK_CLEARS_QUEUED (settle clears QUEUED when it wakes everyone behind
 * a held-back oldest waiter, who then stays queued with nobody to wake it).
 */
#ifndef INIT
#define INIT 1
#endif
#ifndef R
#define R 1
#endif
#ifndef RELS
#define RELS 0
#endif
#ifndef KB                        /* kWakeBatch: 1 here (the model's releases add one permit) */
#define KB 1
#endif
#ifndef NP
#define NP 3
#endif

byte count = INIT;                /* state_ >> 2 */
bit Q = 0;                        /* state_ QUEUED */
bit Wk = 0;                       /* state_ WOKEN */
bit lk = 0;                       /* queue_lock_ */
byte q[NP + 1];                   /* the queue, q[0] the oldest */
byte qlen = 0;
byte age[NP + 1];                 /* node::since, as an arrival number */
byte ages = 0;
byte mark[NP + 1];                /* park_node::woken */
bit permit[NP + 1];               /* park/unpark permit */
byte inside = 0;
byte finished = 0;

inline lock_q() { atomic { lk == 0 -> lk = 1 } }
inline unlock_q() { lk = 0 }

/* Link p at the back, or (requeue) before the first node younger than it. */
inline link(p, requeue) {
  j = qlen;
  if
  :: requeue ->
     do
     :: j > 0 && age[q[j - 1]] > age[p] -> q[j] = q[j - 1]; j--
     :: else -> break
     od
  :: else -> skip
  fi;
  q[j] = p;
  qlen++
}

inline remove_at(k) {
  j = k;
  do
  :: j + 1 < qlen -> q[j] = q[j + 1]; j++
  :: else -> break
  od;
  qlen--;
  q[qlen] = 0
}

inline remove(p) {
  k = 0;
  do
  :: k < qlen && q[k] != p -> k++
  :: else -> break
  od;
  assert(k < qlen);
  remove_at(k)
}

/* settle(n, may_hand_off): under the queue lock. */
inline settle(n, may_hand_off) {
  lock_q();
  handoff = 0; stays = 0;
  if
  :: qlen > 0 && may_hand_off && n > 0 -> handoff = 1      /* due, rate allows */
  :: qlen > 1 -> stays = 1                                  /* due, held back */
  :: true -> skip                                           /* not due */
  fi;
  atomic {                                                  /* the CAS loop */
    first = handoff || stays;
    tw = 0;
    if
    :: Wk == 0 ->
       do
       :: tw < KB && first + tw < qlen && tw < count + n - handoff -> tw++
       :: else -> break
       od
    :: else -> skip
    fi;
    count = count + n - handoff;
    if :: tw > 0 -> Wk = 1 :: else -> skip fi;
#ifdef HELD_BACK_CLEARS_QUEUED
    if :: first + tw == qlen -> Q = 0 :: else -> skip fi
#else
    if :: first + tw == qlen && !stays -> Q = 0 :: else -> skip fi
#endif
  };
  nw = 0;
  if
  :: handoff -> w1 = q[0]; remove_at(0); mark[w1] = 2; nw = 1
  :: else -> skip
  fi;
  /* the tw waiters after the oldest when it stays, else from the front */
  k = stays;
  if
  :: tw > 0 -> w2 = q[k]; remove_at(k); mark[w2] = 1
  :: else -> skip
  fi;
  if
  :: tw > 1 -> w3 = q[k]; remove_at(k); mark[w3] = 1
  :: else -> skip
  fi;
  unlock_q();
  if :: handoff -> permit[w1] = 1 :: else -> skip fi;
  if :: tw > 0 -> permit[w2] = 1 :: else -> skip fi;
  if :: tw > 1 -> permit[w3] = 1 :: else -> skip fi
}

/* barge(): take a free permit; a winner that leaves permits free, waiters
 * queued and none woken wakes the next. */
inline barge() {
  atomic {
    if
    :: count > 0 -> count--; got = 1; chain = (count > 0 && Q == 1 && Wk == 0)
    :: else -> chain = 0
    fi
  };
#ifndef NO_CHAIN_WAKE
  if :: chain -> settle(0, 0) :: else -> skip fi
#endif
}

/* queue_while(count == 0) + await_taken(): v = the mark, 0 timed out, 3 not queued. */
inline queue_and_wait(me, requeue, timed) {
  lock_q();
  atomic {
    if
    :: count == 0 -> Q = 1; ok = 1
    :: else -> ok = 0
    fi
  };
  if
  :: ok ->
     mark[me] = 0;
     link(me, requeue);
     unlock_q();
     do
     :: mark[me] != 0 -> v = mark[me]; break
     :: else ->
        if
        :: permit[me] == 1 -> permit[me] = 0   /* park returned (maybe spuriously) */
        :: timed ->                            /* park_until timed out */
           lock_q();
           v = mark[me];
           if
           :: v == 0 -> remove(me); if :: qlen == 0 -> Q = 0 :: else -> skip fi
           :: else -> skip
           fi;
           unlock_q();
           break
        fi
     od
  :: else -> unlock_q(); v = 3
  fi
}

/* release(1): the fast path's CAS loop, else settle(1, true). */
inline release() {
  atomic {
    if
    :: Q == 1 && Wk == 0 -> slow = 1
    :: Q == 1 && Wk == 1 -> slow = 1           /* the 256-release budget ran out */
    :: else -> count++; slow = 0
    fi
  };
  if :: slow -> settle(1, 1) :: else -> skip fi
}

proctype Acquirer(byte me; bit may_time_out) {
  byte v, j, k, r = 0, first, tw, nw, w1, w2, w3;
  bit got, chain, requeue, ok, handoff, stays, slow;
  do
  :: r < R ->
     got = 0; requeue = 0;
     atomic { if :: count > 0 -> count--; got = 1 :: else -> skip fi };  /* try_acquire */
     if
     :: got -> skip
     :: else ->
        age[me] = ages; ages++;                /* since: when it first queues */
        do
        :: barge();
           if
           :: got -> break
           :: else -> skip
           fi;
           if
           :: may_time_out -> break            /* the deadline passed after a failed barge */
           :: true ->
              queue_and_wait(me, requeue, may_time_out);
              if
              :: v == 1 -> Wk = 0; requeue = 1  /* woken to compete: clear WOKEN */
              :: v == 2 -> got = 1; break       /* handed a permit */
              :: v == 3 -> skip                 /* a permit came free: barge again */
              :: v == 0 -> break                /* timed out */
              fi
           fi
        od
     fi;
     if
     :: got ->
        atomic { inside++; assert(inside <= INIT + RELS) };
#ifndef KEEP
        inside--;
        release()
#endif
     :: else -> skip
     fi;
     r++
  :: else -> break
  od;
  finished++
}

/* Adds RELS permits, one release(1) at a time. */
proctype Releaser() {
  byte j, k, r = 0, first, tw, nw, w1, w2, w3;
  bit handoff, stays, slow;
  do
  :: r < RELS -> release(); r++
  :: else -> break
  od;
  finished++
}

init {
  atomic {
    run Acquirer(1, 0);
    if
    :: NP > 2 -> run Acquirer(2, 0); run Acquirer(3, 1)
    :: else -> run Acquirer(2, 1)
    fi;
    run Releaser()
  };
  finished == NP + 1;
  assert(count + inside == INIT + RELS && Q == 0 && Wk == 0 && qlen == 0 && lk == 0)
}
