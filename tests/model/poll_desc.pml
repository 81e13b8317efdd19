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
  od
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
