/* SPIN model of tessera::mutex's box office (include/tessera/mutex.h,
 * sync/mutex.cpp): the state word (LOCKED, QUEUED, WOKEN), barging, the FIFO
 * queue of parked callers under its spin lock, unlock's fast and slow paths,
 * the fair hand-off, timed withdrawal, and the WOKEN token of "Lost races": an
 * OS thread that was woken and lost the race keeps WOKEN and re-parks with a
 * retry timer (kRetryAfter); on the caller's deadline it gives WOKEN up only
 * while the lock is held (give_up_token), else takes the lock.
 *
 * Processes: NP lockers, R1, R2, R3 acquisitions each. Locker 1 is an OS thread
 * calling lock(); locker 2 an OS thread calling try_lock_for() (it may time
 * out wherever the code checks its deadline); locker 3 (NP = 3) a fiber calling
 * lock(), which hands WOKEN back at once, taking the lock in the same CAS if it
 * is free. Whether an unlock hands off (the 1 ms fairness timer), whether a
 * WOKEN unlock may take the fast path (the 256-unlock budget), and when timers
 * fire are left to the model checker: every choice is explored. Each statement
 * is atomic, as the implementation's RMWs and loads are.
 *
 * Checked:
 *  - mutual exclusion;
 *  - no lost wake-up: every process terminates (invalid end states);
 *  - at the end: state word clear, queue empty.
 * Mutations that must be caught (run_model.sh): -DGIVE_UP_ANYWAY (clear WOKEN
 * on the deadline whether or not the lock is held), -DNO_RETRY_TIMER (keep
 * WOKEN but park without the retry timer) and -DRELEASE_ON_STALE_WOKEN
 * (unlock_slow releasing with a load of WOKEN and a separate fetch_and: a token
 * given up in between strands the queue; this model found that race).
 */
#ifndef NP
#define NP 3
#endif
#ifndef R1                          /* rounds of locker 1, 2, 3 */
#define R1 1
#endif
#ifndef R2
#define R2 1
#endif
#ifndef R3
#define R3 2
#endif

bit L = 0;                        /* state_ LOCKED */
bit Q = 0;                        /* state_ QUEUED */
bit Wk = 0;                       /* state_ WOKEN */
bit lk = 0;                       /* queue_lock_ */
byte q[NP + 1];                   /* the queue, FIFO, q[0] the head */
byte qlen = 0;
byte mark[NP + 1];                /* park_node::woken */
bit permit[NP + 1];               /* park/unpark permit */
byte inside = 0;
byte finished = 0;

inline lock_q() { atomic { lk == 0 -> lk = 1 } }
inline unlock_q() { lk = 0 }
inline unpark(p) { permit[p] = 1 }

inline push(p, front) {
  if
  :: front ->
     j = qlen;
     do
     :: j > 0 -> q[j] = q[j - 1]; j--
     :: else -> break
     od;
     q[0] = p
  :: else -> q[qlen] = p
  fi;
  qlen++
}

inline remove(p) {
  j = 0;
  do
  :: j < qlen && q[j] != p -> j++
  :: else -> break
  od;
  assert(j < qlen);
  do
  :: j + 1 < qlen -> q[j] = q[j + 1]; j++
  :: else -> break
  od;
  qlen--;
  q[qlen] = 0
}

/* unlock(): the fast path's load, then its CAS; else unlock_slow(). */
inline unlock() {
  assert(L == 1);
  sl = L; sq = Q; sw = Wk;                     /* s = state_.load() */
  if
  :: sq == 0 || (sw == 1 && true) -> fast = 1
  :: sw == 1 -> fast = 0                       /* the 256-unlock budget ran out */
  :: else -> fast = 0
  fi;
  if
  :: fast -> atomic {                          /* CAS(s, s & ~LOCKED) */
       if
       :: L == sl && Q == sq && Wk == sw -> L = 0; done = 1
       :: else -> done = 0
       fi
     }
  :: else -> done = 0
  fi;
  if
  :: done -> skip
  :: else ->                                   /* unlock_slow() */
     lock_q();
     if
     :: qlen == 0 -> atomic { L = 0; Q = 0 }; unlock_q()
     :: else ->
        if
        :: handoff = 1
        :: handoff = 0
        fi;
        released = 0;
#ifdef RELEASE_ON_STALE_WOKEN
        if
        :: !handoff && Wk == 1 -> released = 1
        :: else -> skip
        fi;
        if :: released -> L = 0 :: else -> skip fi;
#else
        if                                             /* CAS: LOCKED off if WOKEN is set */
        :: !handoff -> atomic { if :: Wk == 1 -> L = 0; released = 1 :: else -> skip fi }
        :: else -> skip
        fi;
#endif
        if
        :: released -> unlock_q()                      /* one wake-up in flight */
        :: else ->
           n = q[0];
           remove(n);
           atomic {                                    /* the CAS loop */
             if
             :: handoff -> skip                        /* LOCKED stays: it is n's */
             :: else -> L = 0; Wk = 1
             fi;
             Q = (qlen > 0)
           };
           if
           :: handoff -> mark[n] = 2
           :: else -> mark[n] = 1
           fi;
           unlock_q();
           unpark(n)
        fi
     fi
  fi
}

/* queue_while_held() + await_taken(): v = the mark, 0 timed out, 3 not queued.
 * `timed`: the park has a deadline (the caller's, or the retry timer). */
inline queue_and_wait(me, requeue, timed) {
  lock_q();
  atomic {                                     /* CAS QUEUED in while LOCKED */
    if
    :: L == 1 -> Q = 1; ok = 1
    :: else -> ok = 0
    fi
  };
  if
  :: ok ->
     mark[me] = 0;
     push(me, requeue);
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

proctype Locker(byte me; bit thread; bit may_time_out; byte rounds) {
  byte v, j, n, r = 0;
  bit got, requeue, token, ok, handoff, fast, done, sl, sq, sw, old, timed, released;
  do
  :: r < rounds ->
     got = 0; requeue = 0; token = 0;
     atomic { old = L; L = 1 };                /* try_lock(): fetch_or LOCKED */
     if
     :: old == 0 -> got = 1
     :: else ->                                /* lock_slow() */
        do
        :: L == 0 ->                           /* barge: !locked() && try_lock() */
           atomic { old = L; L = 1 };
           if
           :: old == 0 ->
              if :: token -> Wk = 0 :: else -> skip fi;
              got = 1; break
           :: else -> skip
           fi
        :: L == 1 ->
           if
           :: may_time_out -> break            /* deadline passed before queueing */
           :: true ->
#ifdef NO_RETRY_TIMER
              timed = may_time_out;
#else
              timed = may_time_out || token;
#endif
              queue_and_wait(me, requeue, timed);
              if
              :: v == 1 ->                     /* woken: we hold WOKEN */
                 if
                 :: thread -> token = 1; requeue = 1
                 :: else ->                    /* a fiber hands it back, and takes */
                    atomic {                   /* a free lock in the same CAS */
                      Wk = 0;
                      if :: L == 0 -> L = 1; got = 1 :: else -> skip fi
                    };
                    if :: got -> break :: else -> requeue = 1 fi
                 fi
              :: v == 2 ->                     /* handed LOCKED */
                 if :: token -> Wk = 0 :: else -> skip fi;
                 got = 1; break
              :: v == 3 -> skip                /* not queued: barge again */
              :: v == 0 ->
                 if
                 :: token -> requeue = 1       /* the retry timer: barge again */
                 :: may_time_out -> break      /* the caller's deadline */
                 fi
              fi
           fi
        od;
        if
        :: !got && token ->                    /* give_up_token() */
#ifdef GIVE_UP_ANYWAY
           Wk = 0
#else
           atomic {
             if
             :: L == 0 -> L = 1; Wk = 0; got = 1
             :: else -> Wk = 0
             fi
           }
#endif
        :: else -> skip
        fi
     fi;
     if
     :: got ->
        inside++;
        assert(inside == 1);
        inside--;
        unlock()
     :: else -> skip
     fi;
     r++
  :: else -> break
  od;
  finished++
}

init {
  atomic {
    run Locker(1, 1, 0, R1);                       /* OS thread, lock() */
    run Locker(2, 1, 1, R2);                       /* OS thread, try_lock_for() */
    if
    :: NP > 2 -> run Locker(3, 0, 0, R3)           /* fiber, lock() */
    :: else -> skip
    fi
  };
  finished == NP;
  assert(L == 0 && Q == 0 && Wk == 0 && qlen == 0 && lk == 0)
}
