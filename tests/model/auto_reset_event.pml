/* SPIN model of auto_reset_event's box office (include/tessera/event.h,
 * Preshing's "Semaphores are Surprisingly Versatile"): `status_` (1 signalled,
 * 0 idle, -n n callers counted as waiting) in front of a gate semaphore, with
 * timed waits that withdraw.
 *
 * The gate is abstracted to a permit count: an acquire takes a permit when
 * there is one, and a timed acquire may instead time out at any point, even
 * with a permit there (it looked before the release). The semaphore itself is
 * model-checked in lobby.pml and barging_semaphore.pml.
 *
 * Processes: NS signallers, SIGS signal() calls each (the CAS on status_, then,
 * when it counted a waiter in, a separate gate release); NW waiters, R
 * wait_for() calls each, every one of which may time out. signal() and
 * wait_for() are all any process calls, so every process must end: a wait
 * that outlives every signal is an invalid end state.
 *
 * Checked:
 *  - no hang: every process terminates (invalid end states), and a waiter
 *    that finds itself counted in after its timeout has a permit in the gate
 *    or on its way (else its look-again loop would spin until another caller
 *    came);
 *  - at the end: status_ is 0 or 1, the gate holds no permit (one left there
 *    would let a later wait through without a signal), and every signal that
 *    did not collapse into a set event let exactly one wait through:
 *    passes + status_ == counted signals.
 * Mutation that must be caught (run_model.sh): -DUNTIMED_FALLBACK, the
 * earlier withdrawal: a waiter that found itself counted in after its timeout
 * waited for the gate untimed, and a caller arriving meanwhile could take the
 * permit meant for it.
 */
#ifndef NS
#define NS 1
#endif
#ifndef SIGS
#define SIGS 2
#endif
#ifndef NW
#define NW 2
#endif
#ifndef R
#define R 1
#endif

short status = 0;
byte gate = 0;
byte passes = 0;
byte counted = 0;                 /* signals that did not collapse */
byte inflight = 0;                /* releases counted in, not yet made */
byte done = 0;

proctype signaller() {
  byte i = 0;
  bit release = 0;
  do
  :: i < SIGS ->
     atomic {                     /* the CAS loop's successful CAS */
       if
       :: status < 1 -> release = (status < 0); status++; counted++;
          inflight = inflight + release
       :: else -> release = 0     /* collapses into the set event */
       fi
     }
     if
     :: release -> atomic { gate++; inflight-- }  /* gate_.release(), a separate step */
     :: else -> skip
     fi;
     i++
  :: else -> break
  od;
  done++
}

proctype waiter() {
  byte i = 0;
  do
  :: i < R ->
     if
     :: atomic { status >= 1 -> status--; passes++ }  /* fetch_sub saw a signal */
     :: atomic { status < 1 -> status-- } ->           /* counted as waiting */
        if
        :: atomic { gate > 0 -> gate--; passes++ }     /* try_acquire_for(d) */
        :: true ->                                     /* timed out */
#ifdef UNTIMED_FALLBACK
           if
           :: atomic { status < 0 -> status++ }        /* withdrawn */
           :: atomic { status >= 0 -> skip } ->
              atomic { gate > 0 -> gate--; passes++ }  /* gate_.acquire() */
           fi
#else
           do                                          /* withdraw_or_take() */
           :: atomic { status < 0 -> status++ } -> break
           :: atomic { status >= 0 -> assert(gate > 0 || inflight > 0) } ->
              if
              :: atomic { gate > 0 -> gate--; passes++ } -> break
              :: true -> skip                          /* 100 µs passed: look again */
              fi
           od
#endif
        fi
     fi;
     i++
  :: else -> break
  od;
  done++
}

init {
  byte k;
  atomic {
    for (k : 1 .. NS) { run signaller() }
    for (k : 1 .. NW) { run waiter() }
  }
  (done == NS + NW);
  assert(status == 0 || status == 1);
  assert(gate == 0);
  assert(passes + status == counted)
}
