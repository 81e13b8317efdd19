/* SPIN model of a fiber's permit word (sched/fiber_park.cpp, sched/timers.cpp;
 * the state machine in sched/scheduler.h): park() and park_until() of one
 * fiber against unparks from other fibers or threads and its own timer.
 *
 * Values: 0 empty, 1 permit, -1 parked in park(), -2 parked in park_until(),
 * 2 timer fired. The post-switch CAS (0 -> -1 or -2) runs once the fiber's
 * registers are saved; only after it may anyone make the fiber runnable. An
 * unpark of a fiber parked in park() hands it over as 0 (no permit to consume
 * when it resumes); one parked in park_until() leaves 1, so that park_until()
 * tells an unpark from its timer.
 *
 * Processes:
 *  - the fiber: until it has seen every unparker's flag, park() (or, with
 *    TIMED, nondeterministically park_until(), whose timer may fire at any
 *    moment while its entry is current);
 *  - NU unparkers: each sets its flag, then unparks the fiber;
 *  - the timer (TIMED): fires the fiber's entry if its sequence is current.
 * Each statement is atomic, as the RMWs are.
 *
 * Checked:
 *  - the fiber is made runnable only with its registers saved, and never
 *    twice at once;
 *  - when it resumes, the word is 0 or 1 (not parked, and from park() never
 *    a timer's mark); park_until() reads 1 or 2, never 0;
 *  - it sees every flag in the end (no lost wake-up: a valid end state), and
 *    with TIMER_ONLY (no unparkers, one park_until) its timer wakes it.
 * Mutations that must be caught: -DPUBLISH_BEFORE_SWITCH (the parked value
 * is stored before the switch: resumed with unsaved registers),
 * -DNO_REQUEUE (a permit that raced the switch-out does not re-queue the
 * fiber), -DHANDOFF_TIMED (an unpark hands a park_until() over as 0 too) and
 * -DTIMER_SKIPS_SWITCHING (the timer ignores a fiber still switching out).
 */
#ifndef NU
#define NU 2
#endif

short state = 0;
bit saved = 0;       /* the fiber's registers are saved (it is not running) */
byte queued = 0;     /* how many times it sits in a run queue */
bit flag[NU];
byte seen = 0;       /* flags the fiber has seen */
byte seq = 0;        /* timer_seq */
bit armed = 0;       /* a timer entry is in the heap */
byte entry_seq = 0;
bit finished = 0;

inline schedule() {  /* schedule_woken / push_fired: makes the fiber runnable */
  assert(saved);
  assert(queued == 0);
  queued++
}

/* block_current(act): switch away; the post-switch action runs on the next
 * context, once the registers are saved. `parked` is -1 or -2. */
inline switch_out(parked) {
#ifdef PUBLISH_BEFORE_SWITCH
  atomic {
    if
    :: state == 0 -> state = parked
    :: else -> skip
    fi
  };
  atomic {
    saved = 1;
    if
    :: state == parked -> skip
    :: else ->
       if
       :: parked == -1 -> state = 0
       :: else -> skip
       fi;
       queued++
    fi
  };
#else
  atomic {
    saved = 1;
    if
    :: state == 0 -> state = parked
    :: else ->           /* an unpark (or the timer) came during the switch */
       if
       :: parked == -1 -> state = 0  /* park(): consume it here */
       :: else -> skip
       fi;
#ifndef NO_REQUEUE
       queued++          /* push_local */
#endif
    fi
  };
#endif
  atomic { queued > 0 -> queued--; saved = 0; assert(state == 0 || state == 1 || (parked == -2 && state == 2)) }
}

inline park() {
  if
  :: atomic { state == 1 -> state = 0 }  /* the fast path: a permit waits */
  :: atomic { state != 1 -> skip };
     switch_out(-1)
  fi
}

inline park_until() {
  if
  :: atomic { state == 1 -> state = 0 }
  :: atomic { state != 1 -> armed = 1; entry_seq = seq };  /* add_timer */
     switch_out(-2);
     seq++;                               /* our entry is stale now */
     atomic { assert(state != 0); state = 0 }  /* exchange: 1 unpark, 2 timer */
  fi
}

active proctype fiber() {
  byte i;
#ifdef TIMER_ONLY
  park_until();
#else
  do
  :: seen == NU -> break
  :: else ->
     atomic {
       i = 0;
       seen = 0;
       do
       :: i < NU -> seen = seen + flag[i]; i++
       :: else -> break
       od
     };
     if
     :: seen == NU -> skip
     :: else ->
#ifdef TIMED
        if
        :: park()
        :: park_until()
        fi
#else
        park()
#endif
     fi
  od;
#endif
  finished = 1
}

#ifndef TIMER_ONLY
active [NU] proctype unparker() {
  short v;
  flag[_pid - 1] = 1;
  atomic {
    v = state;
    if
#ifdef HANDOFF_TIMED
    :: v < 0 -> state = 0
#else
    :: v == -1 -> state = 0
    :: v == -2 -> state = 1
#endif
    :: v >= 0 -> state = 1
    fi;
    if
    :: v < 0 -> schedule()
    :: else -> skip
    fi
  }
}
#endif

#if defined(TIMED) || defined(TIMER_ONLY)
active proctype timer() {
end:
  do
  :: atomic {
       armed ->
       armed = 0;
       if
       :: entry_seq == seq ->
          if
          :: state == -2 -> state = 2; schedule()
#ifndef TIMER_SKIPS_SWITCHING
          :: state == 0 -> state = 2
#endif
          :: else -> skip
          fi
       :: else -> skip   /* stale */
       fi
     }
  od
}
#endif

/* The fiber must finish: checked as a valid end state (the fiber has no end label). */
