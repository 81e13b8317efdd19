/* SPIN model of the TWA semaphore's concurrency restriction (include/tessera/
 * semaphore.h "Concurrency restriction", sync/semaphore.cpp): the lobby in
 * front of the ticket queue. Ticket and grant, the crowded() check (two
 * separate loads), the lobby (a FIFO under its spin lock, and the lobby_
 * counter), release's "RMW grant; LD ticket; LD lobby_" against the joiner's
 * "RMW lobby_; LD grant, ticket" (admit_from_lobby), the entering member's
 * admit, and optionally the oldest member's fairness timer and a caller's
 * deadline in the lobby (then it leaves and tries try_acquire once).
 * TIMER_FIRST_ONLY limits the timer to the first caller to join the lobby,
 * which keeps four acquirers within reach of an exhaustive search.
 *
 * The ticket queue's own waiting (chains, park) is model-checked in
 * wait_chain.pml; here a queued ticket waits as a blocking guard (G > t).
 *
 * Processes: NP acquirers, R rounds each of acquire; critical section; release.
 * The semaphore starts with INIT permits, admission window W.
 *
 * Checked:
 *  - never more holders than permits;
 *  - no lost wake-up: every process terminates (invalid end states), in
 *    particular no caller sleeps in the lobby while a permit stays free;
 *  - at the end: lobby empty, all permits back (G - T == INIT);
 *  - lobby order: when a lobby member takes its ticket, no member that joined
 *    the lobby after it has taken one already, unless both were called in for
 *    free permits (then both are admitted at once and their order is moot).
 * Mutations that must be caught (run_model.sh): -DJOIN_SKIPS_ADMIT (a joiner
 * parks without looking for a free permit after counting itself in: a release
 * that read lobby_ == 0 just before is missed), -DRELEASE_SKIPS_LOBBY (the
 * release fast path does not look at the lobby) and -DFORCED_TICKET_AFTER_UNLOCK
 * (a member forced in by the fairness timer takes its ticket after it lets go
 * of the lobby lock, and regardless of older members still entering: the code
 * before 2026-11-22, which CI caught admitting 0,1,3,2).
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
#ifndef W
#define W 1
#endif

byte T = 0;                 /* ticket_ */
byte G = INIT;              /* grant_ */
byte lobby = 0;             /* lobby_ */
byte entering = 0;          /* entering_: called in, no ticket yet */
bit lk = 0;                 /* lobby_lock_ */
byte lq[NP];                /* lobby_list_, FIFO, lq[0] the oldest */
byte lqlen = 0;
bit woken[NP];              /* park_node::woken */
bit permit[NP];             /* park/unpark permit */
byte inside = 0;
byte finished = 0;
byte seqctr = 0;            /* lobby joins so far: a member's place in line */
byte myseq[NP];             /* the place of each member's (latest) join */
bit inl[NP];                /* joined the lobby this round */
bit tk[NP];                 /* ... and has taken its ticket */

/* A lobby member p takes its ticket (into t): check lobby order first. */
inline lobby_ticket(p) {
  atomic {
    j = 0;
    do
    :: j < NP ->
       if
       :: inl[j] && tk[j] && myseq[j] > myseq[p] -> assert(woken[p] && woken[j])
       :: else -> skip
       fi;
       j++
    :: else -> break
    od;
    t = T;
    T++;
    tk[p] = 1
  }
}

inline lock_l() { atomic { lk == 0 -> lk = 1 } }
inline unlock_l() { lk = 0 }

inline pop_front() {
  j = 0;
  do
  :: j + 1 < lqlen -> lq[j] = lq[j + 1]; j++
  :: else -> break
  od;
  lqlen--
}

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

/* admit_from_lobby(): under the lock, take as many of the oldest as there are
 * free permits and mark them; after it, unpark them and the new oldest (which
 * starts its timer). Permits promised to members called in earlier that
 * have not taken a ticket yet (entering_) are not free. (The code takes them in
 * batches of 16; INIT <= 2 here.) */
inline admit_from_lobby() {
  lock_l();
  adm = 0;
  taken = 0;
  do
  :: lqlen > 0 && G > T + entering ->
     h = lq[0];
     pop_front();
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

proctype acquirer(byte p) {
  byte round = 0, t, tt, gg, g, h, nh, j, grant_then, adm, taken;
  bit head, got, expired, forced, stay;
  do
  :: round < R ->
     got = 0;
     /* crowded(): ticket and grant read by two loads */
     tt = T;
     gg = G;
     if
     :: tt >= gg + W ->
        /* lobby_wait() */
        woken[p] = 0;
        lock_l();
        lq[lqlen] = p;
        lqlen++;
        lobby++;
        myseq[p] = seqctr;
        seqctr++;
        inl[p] = 1;
        tk[p] = 0;
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
           :: !head && lqlen > 0 && lq[0] == p -> head = 1; grant_then = G
           :: else -> skip
           fi;
           if
           :: permit[p] -> permit[p] = 0          /* park() returns */
#ifdef TIMER
#ifdef TIMER_FIRST_ONLY
           :: head && myseq[p] == 0 ->            /* the first member's timer fires */
#else
           :: head ->                             /* the fairness timer fires */
#endif
              if
              :: G != grant_then ->
                 stay = 0;
                 lock_l();
                 if
                 :: woken[p] -> unlock_l()
#ifndef FORCED_TICKET_AFTER_UNLOCK
                 :: !woken[p] && entering > 0 ->  /* older members entering: stay */
                    unlock_l();
                    grant_then = G;
                    stay = 1
#endif
                 :: else ->
                    unlink(p);
                    lobby--;
                    forced = 1;
#ifndef FORCED_TICKET_AFTER_UNLOCK
                    lobby_ticket(p);              /* under the lobby lock */
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
              :: else -> grant_then = G           /* nobody passed: stay */
              fi
#endif
#ifdef DEADLINE
           :: p == 0 && !expired ->               /* caller 0's deadline passes */
              lock_l();
              if
              :: woken[p] -> unlock_l()
              :: else ->
                 expired = 1;
                 if
                 :: lqlen > 0 && lq[0] == p -> nh = NP;
                    unlink(p);
                    if
                    :: lqlen > 0 -> nh = lq[0]
                    :: else -> skip
                    fi
                 :: else -> nh = NP; unlink(p)
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
             :: G > T -> T++; got = 1
             :: else -> skip
             fi
           }
        :: else ->
           /* enter_from_lobby() */
#ifndef FORCED_TICKET_AFTER_UNLOCK
           if
           :: !forced -> lobby_ticket(p)
           :: else -> skip                        /* took it under the lock */
           fi;
#else
           lobby_ticket(p);
#endif
           if
           :: woken[p] -> entering--              /* called in, not forced */
           :: else -> skip
           fi;
           if
           :: lobby != 0 -> admit_from_lobby()
           :: else -> skip
           fi;
           G > t;                                  /* queued: wait for the grant */
           got = 1
        fi
     :: else ->
        atomic { t = T; T++ };
        G > t;
        got = 1
     fi;
     if
     :: got ->
        inside++;
        assert(inside <= INIT);
        inside--;
        /* release(1): RMW grant; LD ticket; LD lobby_ */
        atomic { g = G; G++ };
        tt = T;
        if
        :: tt <= g ->                              /* nobody queued: fast path */
#ifndef RELEASE_SKIPS_LOBBY
           if
           :: lobby != 0 -> admit_from_lobby()
           :: else -> skip
           fi
#else
           skip
#endif
        :: else ->                                 /* after_release() */
           if
           :: lobby != 0 -> admit_from_lobby()
           :: else -> skip
           fi
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
  assert(G - T == INIT);
}
