/* SPIN model of a descriptor's readiness word (sched/poller.h, wait_io and
 * notify in sched/poller.cpp): registration (publishing the waiter), readiness
 * from the poller, close from another thread, and timeouts, racing.
 *
 * Processes:
 *  - the waiter: READS times it needs data; each time it "calls read", which
 *    fails with EAGAIN unless data is there, then runs wait_io: consume a
 *    pending READY, else CAS 0 -> self, re-check closing, park (optionally
 *    timing out), take itself back or consume the READY that replaced it.
 *  - the poller: for each byte the device produces (DATA of them), data
 *    arrives, then an edge-triggered event: exchange(READY) and unpark an old
 *    waiter.
 *  - the closer (with CLOSER): sets closing, then notifies (close_io).
 * Each statement is atomic, as the implementation's RMWs and loads are.
 *
 * Checked:
 *  - no lost readiness or wake-up: the waiter always terminates (valid end
 *    state), having read every byte or seen the close (or, timed, timed out);
 *  - a waiter never stays published in the word after it returns.
 * Mutations that must be caught (run_model.sh): -DSTORE_NOT_CAS (the waiter
 * publishes itself with a plain store: a READY that arrived after its EAGAIN
 * is overwritten and the waiter sleeps through it) and -DNO_UNPARK (the
 * notifier leaves READY but does not unpark the waiter it replaced).
 * With -DSHORT_READS the waiter reads as a stream socket's recv_stream does
 * (io/io.cpp): before each system call it drops a pending READY
 * (consume_readiness); a call takes every byte there (a short read), and the
 * next read then waits first, without the system call, unless the poller has
 * flagged the peer's end of stream (peer_closed, set before the READY it comes
 * with). The device ends the stream after its DATA bytes; the waiter must
 * read every byte and then the end of stream. Mutations: -DNO_PEER_CLOSED
 * (the short read waits first even after the end of stream was flagged: its
 * edge is spent, the waiter sleeps for good) and -DFLAG_AFTER (the poller
 * flags peer_closed after the READY exchange, not before).
 * (Re-reading `closing` after publishing, and the CAS that takes a woken
 * waiter back, turn out not to be needed for these properties: the sticky
 * READY that close() leaves, and the system call every waiter retries before
 * it waits again, cover them. The code keeps both as cheap belts.)
 */
#ifndef DATA
#define DATA 2
#endif
#define READY 1
#define ME 2

byte word = 0;        /* 0, READY, or ME: the waiter is published */
bit closing = 0;
bit permit = 0;       /* the waiter's park permit */
byte avail = 0;       /* bytes the device has, not yet read */
byte produced = 0;
bit finished = 0;
byte result = 0;      /* 1 read everything, 2 closed, 3 timed out */
bit eof = 0;          /* SHORT_READS: the peer ended the stream after its data */
bit peer_closed = 0;  /* SHORT_READS: the poller's sticky flag */

active proctype poller() {
  do
  :: produced < DATA ->
     atomic { avail++; produced++ };
     /* notify(): exchange(READY), unpark an old waiter */
     atomic {
       if
#ifndef NO_UNPARK
       :: word == ME -> permit = 1
#endif
       :: else -> skip
       fi;
       word = READY
     }
  :: produced == DATA -> break
  od;
#ifdef SHORT_READS
  /* the end of stream, and its edge */
  eof = 1;
#ifndef FLAG_AFTER
  peer_closed = 1;
#endif
  atomic {
    if
    :: word == ME -> permit = 1
    :: else -> skip
    fi;
    word = READY
  };
#ifdef FLAG_AFTER
  peer_closed = 1;
#endif
#endif
}

#ifdef CLOSER
active proctype closer() {
  closing = 1;
  atomic {
    if
    :: word == ME -> permit = 1
    :: else -> skip
    fi;
    word = READY
  }
}
#endif

active proctype waiter() {
  byte got = 0;
  byte s;
  bit timed_out;
read_again:
#ifdef SHORT_READS
  /* consume_readiness, then recv: every byte there, else the end of stream
   * (reported only once the data is read), else EAGAIN */
  atomic { if :: word == READY -> word = 0 :: else -> skip fi };
  atomic {
    if
    :: avail > 0 -> got = got + avail; avail = 0
    :: avail == 0 && eof -> result = 1; goto finish
    :: else -> goto wait_loop   /* EAGAIN */
    fi
  };
  /* a short read: the next read waits first unless the end was flagged */
#ifdef NO_PEER_CLOSED
  goto wait_loop;
#else
  if
  :: peer_closed -> goto read_again
  :: else -> goto wait_loop
  fi;
#endif
#else
  if
  :: got == DATA -> result = 1; goto finish
  :: else -> skip
  fi;
  /* the system call */
  atomic {
    if
    :: avail > 0 -> avail--; got++; goto read_again
    :: else -> skip   /* EAGAIN */
    fi
  };
#endif
  /* wait_io */
wait_loop:
  s = word;
  if
  :: s == READY ->
     atomic {
       if
       :: word == READY -> word = 0;
          if
          :: closing -> result = 2; goto finish
          :: else -> goto read_again
          fi
       :: else -> skip
       fi
     };
     goto wait_loop
  :: s == ME -> assert(false)   /* one waiter: never finds itself */
  :: s == 0 -> skip
  fi;
#ifdef STORE_NOT_CAS
  word = ME;
#else
  atomic {
    if
    :: word == 0 -> word = ME
    :: else -> goto wait_loop
    fi
  };
#endif
  timed_out = 0;
#ifndef NO_CLOSING_RECHECK
  if
  :: closing -> skip
  :: else ->
#endif
     /* park (or park_until: may time out instead) */
     if
     :: atomic { permit == 1 -> permit = 0 }
#ifdef TIMED
     :: timed_out = 1
#endif
     fi
#ifndef NO_CLOSING_RECHECK
  fi;
#else
  ;
#endif
#ifdef CLEAR_NOT_CONSUME
  word = 0;
  if
  :: closing -> result = 2; goto finish
  :: timed_out -> result = 3; goto finish
  :: else -> goto read_again
  fi;
#else
  atomic {
    if
    :: word == ME -> word = 0;   /* nobody notified us: took ourselves back */
       if
       :: closing -> result = 2; goto finish
       :: timed_out -> result = 3; goto finish
       :: else -> goto wait_loop   /* spurious: wait again */
       fi
    :: else -> skip
    fi
  };
  /* a notifier replaced us with READY: consume it */
  atomic { if :: word == READY -> word = 0 :: else -> skip fi };
  if
  :: closing -> result = 2; goto finish
  :: else -> goto read_again
  fi;
#endif
finish:
  assert(word != ME);
  assert(result != 0);
#if !defined(CLOSER) && !defined(TIMED)
  assert(result == 1 && got == DATA);   /* nothing to stop it short: it read everything */
#endif
  finished = 1
}
/* A lost readiness or wake-up leaves the waiter parked for good: an invalid
 * end state, which the search reports. */
