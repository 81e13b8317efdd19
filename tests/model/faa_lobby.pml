/* SPIN model of admission::faa_restricted (sync/faa_semaphore.cpp, "The
 * lobby"): the FAA semaphore's permit count, its queue of cells, and the lobby
 * in front of it. The acquirer's crowded check (one load of permits_ < 0),
 * the lobby (a FIFO under its spin lock, and the lobby_ counter), release's
 * "RMW permits_; LD lobby_" against the joiner's "RMW lobby_; LD permits_"
 * (admit_from_lobby), the entering member's decrement and its admit, the
 * oldest member's fairness timer (TIMER; it forces the member in only if the
 * queue served somebody since it became oldest) and a caller's deadline in
 * the lobby (DEADLINE; then it leaves and tries try_acquire once). Without
 * TIMER nothing but a call-in gets a member out: the check that none is lost.
 *
 * The segment queue's cells, cancellation and reclamation are model-checked in
 * segment_queue.pml; here a waiter that decremented to zero or below takes
 * the next cell (E++, a step of its own after the decrement, as suspend()
 * is) and waits until resume() has reached it (D > e); resume() moves D on.
 *
 * Processes: NP acquirers, R rounds each of acquire; critical section; release.
 * The semaphore starts with INIT permits.
 *
 * Checked:
 *  - never more holders than permits;
 *  - no lost wake-up: every process terminates (invalid end states), in
 *    particular no caller sleeps in the lobby while a permit stays free;
 *  - at the end: lobby and queue empty, every permit back (P == INIT);
 *  - lobby order: when a lobby member takes its decrement, no member that
 *    joined the lobby after it has taken one already, unless both were called
 *    in for free permits (then their order is moot).
 * Mutations that must be caught (run_model.sh): -DJOIN_SKIPS_ADMIT (a joiner
 * parks without looking for a free permit after counting itself in),
 * -DRELEASE_SKIPS_LOBBY (a release that frees a permit does not look at the
 * lobby) and -DFORCED_DEC_AFTER_UNLOCK (a member forced in takes its
 * decrement after it lets go of the lobby lock, regardless of older members
 * still entering).
 */
#ifndef NP
#define NP 3
#endif
#ifndef R
#define R 1
#endif
#ifndef INIT
#define INIT 1
#endif

short P = INIT;             /* permits_ */
byte E = 0;                 /* cells taken (the queue's enqueue index) */
byte D = 0;                 /* cells resumed (its dequeue index: resumes()) */
byte lobby = 0;             /* lobby_ */
byte entering = 0;          /* entering_: called in, no decrement yet */
bit lk = 0;                 /* lobby_lock_ */
byte lq[NP];                /* lobby_list_, FIFO, lq[0] the oldest */
byte lqlen = 0;
bit woken[NP];              /* park_node::mark */
bit permit[NP];             /* park/unpark permit */
byte inside = 0;
byte finished = 0;
byte seqctr = 0;            /* lobby joins so far: a member's place in line */
byte myseq[NP];             /* the place of each member's (latest) join */
bit inl[NP];                /* joined the lobby this round */
bit dec[NP];                /* ... and has taken its decrement */

/* A lobby member p takes its decrement (the count before it into q): check
 * lobby order first. */
inline lobby_decrement(p) {
  atomic {
    j = 0;
    do
    :: j < NP ->
       if
       :: inl[j] && dec[j] && myseq[j] > myseq[p] -> assert(woken[p] && woken[j])
       :: else -> skip
       fi;
       j++
    :: else -> break
    od;
    q = P;
    P--;
    dec[p] = 1
  }
}

inline lock_l() { atomic { lk == 0 -> lk = 1 } }
inline unlock_l() { lk = 0 }

inline unlink(p) {
  j = 0;
  do
  :: j < lqlen && lq[j] != p -> j++
  :: else -> break
  od;
  assert(j < lqlen);
  do
  :: j + 1 < lqlen -> lq[j] = lq[j + 1]; j++
  :: else -> break
  od;
  lqlen--
}

/* admit_from_lobby(): under the lock, call in as many of the oldest as there
 * are free permits beyond those promised to members entering; after it,
 * unpark them and the new oldest (which starts its timer). */
inline admit_from_lobby() {
  lock_l();
  adm = 0;
  taken = 0;
  do
  :: lqlen > 0 && P > entering ->
     h = lq[0];
     unlink(h);
     lobby--;
     entering++;
     woken[h] = 1;
     adm = adm | (1 << h);
     taken++
  :: else -> break
  od;
  nh = NP;
  if
  :: taken > 0 && lqlen > 0 -> nh = lq[0]
  :: else -> skip
  fi;
  unlock_l();
  j = 0;
  do
  :: j < NP ->
     if
     :: adm & (1 << j) -> permit[j] = 1
     :: else -> skip
     fi;
     j++
  :: else -> break
  od;
  if
  :: nh < NP -> permit[nh] = 1
  :: else -> skip
  fi
}

/* Having decremented (q: the count before), take a permit or a cell and
 * wait until resume() reaches it. */
inline take_or_queue() {
  if
  :: q > 0 -> skip
  :: else ->
     atomic { e = E; E++ };
     D > e
  fi
}

proctype acquirer(byte p) {
  byte round = 0, e, h, nh, j, resumes_then, adm, taken;
  short q, pp;
  bit head, got, expired, forced, stay;
  do
  :: round < R ->
     got = 0;
     if
     :: P < 0 ->
        /* lobby_wait() */
        woken[p] = 0;
        lock_l();
        lq[lqlen] = p;
        lqlen++;
        lobby++;
        myseq[p] = seqctr;
        seqctr++;
        inl[p] = 1;
        dec[p] = 0;
        unlock_l();
#ifndef JOIN_SKIPS_ADMIT
        admit_from_lobby();
#endif
        head = 0;
        expired = 0;
        forced = 0;
        do
        :: woken[p] -> break
        :: else ->
           if
           :: !head && lqlen > 0 && lq[0] == p -> head = 1; resumes_then = D
           :: else -> skip
           fi;
           if
           :: permit[p] -> permit[p] = 0          /* park() returns */
#ifdef TIMER
           :: head ->                             /* the fairness timer fires */
              if
              :: D != resumes_then ->
                 stay = 0;
                 lock_l();
                 if
                 :: woken[p] -> unlock_l()
#ifndef FORCED_DEC_AFTER_UNLOCK
                 :: !woken[p] && entering > 0 ->  /* older members entering: stay */
                    unlock_l();
                    resumes_then = D;
                    stay = 1
#endif
                 :: else ->
                    unlink(p);
                    lobby--;
                    forced = 1;
#ifndef FORCED_DEC_AFTER_UNLOCK
                    lobby_decrement(p);           /* under the lobby lock */
#endif
                    nh = NP;
                    if
                    :: lqlen > 0 -> nh = lq[0]
                    :: else -> skip
                    fi;
                    unlock_l();
                    if
                    :: nh < NP -> permit[nh] = 1
                    :: else -> skip
                    fi
                 fi;
                 if
                 :: !stay -> break
                 :: else -> skip
                 fi
              :: else -> resumes_then = D         /* nobody served: stay */
              fi
#endif
#ifdef DEADLINE
           :: p == 0 && !expired ->               /* caller 0's deadline passes */
              lock_l();
              if
              :: woken[p] -> unlock_l()
              :: else ->
                 expired = 1;
                 unlink(p);
                 nh = NP;
                 if
                 :: lqlen > 0 -> nh = lq[0]
                 :: else -> skip
                 fi;
                 lobby--;
                 unlock_l();
                 if
                 :: nh < NP -> permit[nh] = 1
                 :: else -> skip
                 fi
              fi;
              break
#endif
           fi
        od;
        if
        :: expired ->
           /* try_acquire(): takes a permit only if one is free */
           atomic {
             if
             :: P > 0 -> P--; got = 1
             :: else -> skip
             fi
           }
        :: else ->
           /* enter_via_lobby() */
#ifndef FORCED_DEC_AFTER_UNLOCK
           if
           :: !forced -> lobby_decrement(p)
           :: else -> skip                        /* took it under the lock */
           fi;
#else
           lobby_decrement(p);
#endif
           if
           :: woken[p] -> entering--              /* called in, not forced */
           :: else -> skip
           fi;
           if
           :: lobby != 0 -> admit_from_lobby()
           :: else -> skip
           fi;
           take_or_queue();
           got = 1
        fi
     :: else ->
        atomic { q = P; P-- };
        take_or_queue();
        got = 1
     fi;
     if
     :: got ->
        inside++;
        assert(inside <= INIT);
        inside--;
        /* release(1): RMW permits_; resume the next cell if owed; LD lobby_ */
        atomic { pp = P; P++ };
        if
        :: pp < 0 -> D++                            /* resume(): a waiter was owed */
        :: else ->                                  /* a permit is free now */
#ifndef RELEASE_SKIPS_LOBBY
           if
           :: lobby != 0 -> admit_from_lobby()
           :: else -> skip
           fi
#else
           skip
#endif
        fi
     :: else -> skip
     fi;
     round++
  :: else -> break
  od;
  finished++
}

init {
  byte i;
  atomic {
    i = 0;
    do
    :: i < NP -> run acquirer(i); i++
    :: else -> break
    od
  }
  finished == NP;
  assert(lqlen == 0 && lobby == 0 && entering == 0);
  assert(P == INIT && D == E);
}
