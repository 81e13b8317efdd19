/* SPIN model of how a Runtime knows its run is over when jobs are queued
 * (sched/job_queue.cpp, runtime_impl::fiber_finished and work_left): `live`
 * counts fibers and *active* runners, not jobs; a job queued by a live fiber
 * or runner is covered by it until a runner takes it; whoever brings `live`
 * to zero looks at the job queues, and at `live` once more, before it
 * declares the run over.
 *
 * Processes:
 *  - the root fiber: queues a job, then ends (live--, then the end check);
 *  - two workers: each waits until a job is queued or the run is over; with a
 *    job in sight it hands out a runner (live++), which takes jobs (any may
 *    queue one more, up to SPAWN in all) and steps aside after any job, or
 *    when it finds none (live--, then the end check). (A runner that steps
 *    aside having run nothing adds only stutter, and unbounded epochs.)
 * Each statement is atomic, as the RMWs and seq_cst loads are.
 *
 * Checked:
 *  - the run is never declared over while a job is queued or running;
 *  - it is declared over in the end (no worker is left waiting: a valid end
 *    state), with every job run (nothing queued or running at that point,
 *    and only running jobs queue more).
 * Mutations that must be caught: -DNO_WORK_CHECK (the end check does not
 * look at the queues: the root's job is dropped), -DNO_RECHECK_LIVE (no
 * second look at `live`: a runner handed out between the zero and the look at
 * the queues takes the last job, and the run ends under it) and -DCOUNT_ONLY
 * (the second look compares the count, not the epoch: a runner queues a job,
 * steps aside to zero and is handed out again between the two looks).
 */
#ifndef SPAWN
#define SPAWN 2
#endif

byte live = 1;      /* the root fiber */
byte epoch = 1;     /* how often live was raised (the high bits of the real counter) */
byte queued = 0;
byte running = 0;
byte pushed = 0;
byte ran = 0;
bit all_done = 0;

/* fiber_finished(): the caller has just done live-- and seen `was`, in
 * epoch `ep`. */
inline finished(was, ep) {
  if
  :: was == 1 ->
#ifndef NO_WORK_CHECK
     if
     :: queued > 0 -> goto skip_end
     :: else -> skip
     fi;
#endif
#ifndef NO_RECHECK_LIVE
     if
#ifdef COUNT_ONLY
     :: live != 0 -> goto skip_end
#else
     :: live != 0 || epoch != ep -> goto skip_end
#endif
     :: else -> skip
     fi;
#endif
     assert(queued == 0 && running == 0);
     all_done = 1;
  :: else -> skip
  fi;
skip_end: skip
}

active proctype root() {
  byte was, ep;
  atomic { queued++; pushed++ };
  atomic { was = live; ep = epoch; live-- };
  finished(was, ep)
}

active [2] proctype worker() {
  byte was, ep;
  bit took;
  do
  :: all_done -> break
  :: queued > 0 ->               /* has_job_work(): a runner is handed out */
     atomic { live++; epoch++ };  /* acquire_runner(), before the first take */
     took = 0;
     do
     :: atomic { queued > 0 -> queued--; running++ };   /* take_job() */
        took = 1;
        if
        :: pushed < SPAWN -> atomic { queued++; pushed++ }  /* the job queues another */
        :: true -> skip
        fi;
        atomic { running--; ran++ }
     :: queued == 0 -> break     /* none left (another runner took it) */
     :: took -> break            /* it steps aside for fibers, jobs still queued */
     od;
     atomic { was = live; ep = epoch; live-- };  /* post_action::idle_runner */
     finished(was, ep)
  od
}

