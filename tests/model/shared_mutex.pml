/* SPIN model of tessera::shared_timed_mutex (include/tessera/shared_timed_mutex.h,
 * sync/shared_timed_mutex.cpp): the distributed reader indicator (slots) met
 * Dekker-style by a barging writer that drains it, the queue of parked waiters
 * under a spin lock, hand-off, timed withdrawal, and try_lock's undo.
 *
 * Slots: 0 and 1 are owned slots (threads A and B own them), 2 a shared one.
 * Each slot is two growing counters, ent (entered) and lft (left); a writer's
 * readers_inside() reads every lft first, then every ent, one at a time.
 * Plain stores (an owned slot's count-out; a biased thread's count-in) go into
 * their thread's store buffer, a FIFO of up to CAP pending increments (sb[],
 * sbn[]), and reach the slot in order whenever the Flusher process drains the
 * head; any RMW by the thread drains its whole buffer first, as x86's locked
 * instructions do. A writer about to park runs membarrier, which drains every
 * buffer at once. Counting in without the bias is an RMW (immediately
 * visible); the writer's counting-in of handed-over readers uses the shared
 * slot.
 *
 * Used slots: a reader marks its slot in `used` (bit s) before it counts in
 * without the bias (and before taking it), and the slot it leaves through
 * before counting out; the first mark by a thread is an RMW (draining its
 * buffer), later ones a load. Bit 2 (the hand-off slot) is set from the start,
 * and so is the slot of a thread the lock starts biased to. A writer's
 * readers_inside() reads `used` once, then only the marked slots
 * (-DNO_MARK_IN and -DNO_MARK_OUT, the mutations, lose mutual exclusion and a
 * wake-up).
 *
 * Bias: the first reader entering through an owned slot CASes bias from 0 to
 * its thread (2 + slot); from then on that thread counts in with a plain store.
 * A writer (threads C, D: never the biased thread) that finds the lock biased
 * revokes it (bias = 1, for good) and runs membarrier before reading the slots
 * (-DREVOKE_BARRIER=skip, the mutation, loses mutual exclusion).
 *
 * Processes: NR readers and NW writers, ROUNDS acquisitions each. Reader 1
 * enters through owned slot 0 and leaves through owned slot 1 (a fiber that
 * migrated from thread A to B); reader 2 enters through owned slot 1 and
 * leaves through the shared slot (it migrated to a thread without an owned
 * slot). Migrating drains the old thread's store buffer (the switch out runs
 * locked instructions). Reader 2 may time out wherever a timed call can
 * (queued); so may the first writer with -DW1_MAY_TIME_OUT=1 (queued, or
 * draining), and it uses try_lock first with -DW1_TRY_FIRST=1; the second
 * writer (NW=2) does both. run_model.sh lists the configurations CI checks. Whether an unlock hands off (the 1 ms fairness timer) is left to the
 * model checker: every choice is explored. Each statement is atomic, as the
 * seq_cst RMWs and loads of the implementation are; readers_inside() reads the
 * slots one at a time, as the code does.
 *
 * Checked:
 *  - mutual exclusion: never a writer inside with anyone else inside;
 *  - no lost wake-up: every process terminates (invalid end states);
 *  - at the end: state word clear, queue empty, entered == left.
 */
#ifndef NR
#define NR 2
#endif
#ifndef NW
#define NW 2
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
#ifndef WROUNDS                     /* a writer's rounds */
#define WROUNDS ROUNDS
#endif
#ifndef W1_MAY_TIME_OUT             /* the first writer: may time out, try_lock first */
#define W1_MAY_TIME_OUT 0
#endif
#ifndef W1_TRY_FIRST
#define W1_TRY_FIRST 0
#endif
#ifndef RECHECK_BIAS                /* -DRECHECK_BIAS=0: the mutation */
#define RECHECK_BIAS 1
#endif
#define NP (NR + NW + 1)          /* process ids 1..NR+NW */
#ifndef MEMBARRIER_BEFORE_PARK      /* -DMEMBARRIER_BEFORE_PARK=skip: the mutation */
#define MEMBARRIER_BEFORE_PARK membarrier()
#endif
#ifndef REVOKE_BARRIER              /* -DREVOKE_BARRIER=skip: the mutation */
#define REVOKE_BARRIER membarrier()
#endif
#ifndef CAP
#define CAP 3                       /* store-buffer entries per thread */
#endif
#define IN 1                        /* store-buffer entry: ent[s] += 1 */
#define OUT 2                       /*                      lft[s] += 1 */

bit W = 0;                        /* state_ WRITER */
bit Q = 0;                        /* state_ QUEUED */
byte ent[3];                      /* the reader slots: 0, 1 owned; 2 shared */
byte lft[3];
byte sb[2 * CAP];                 /* thread s's store buffer: sb[s*CAP ..], oldest first */
byte sbn[2];
#ifndef BIAS0                       /* bias_ at the start: -DBIAS0=2, already biased to A */
#define BIAS0 0
#endif
/* The bias: the code keeps it in state_'s low 32 bits (1 none yet, 2 revoked,
 * else a slot code), so a biased reader reads it and WRITER in one load; here it
 * is a variable of its own, read apart from W, and that one load is one of the
 * interleavings checked. */
byte bias = BIAS0;                /* 0 none yet, 1 revoked, 2 + s thread s */
#if BIAS0 >= 2
byte used = 4 | (1 << (BIAS0 - 2)); /* used_: bit s, slot s may hold counts */
#else
byte used = 4;
#endif
#ifdef NO_MARK_IN                   /* -DNO_MARK_IN, -DNO_MARK_OUT: the mutations */
#define MARK_IN(s) skip
#else
#define MARK_IN(s) mark_used(s)
#endif
#ifdef NO_MARK_OUT
#define MARK_OUT(s) skip
#else
#define MARK_OUT(s) mark_used(s)
#endif
byte drainer = 0;                 /* drainer_: 0 = none */
bit lk = 0;                       /* lock_, the queue's spin lock */
byte q[NP];                       /* the queue, FIFO, q[0] the head */
byte qlen = 0;
bit isshared[NP];
byte mark[NP];                    /* park_node::woken */
bit permit[NP];                   /* park/unpark permit */
byte readers_in = 0;
byte writers_in = 0;
byte finished = 0;

#define OWNED(s) ((s) < 2)
/* readers_inside(): `used` once, then every marked slot's lft, then every marked
 * ent, one load at a time; with -DCOARSE_SUM `used` and the lfts in one step and
 * the ents in the next (fewer states). */
#define LFT(s) (((u >> (s)) & 1) -> lft[s] : 0)
#define ENT(s) (((u >> (s)) & 1) -> ent[s] : 0)
#ifdef COARSE_SUM
#define SUM_SLOTS() atomic { u = used; sum = 0 - LFT(0) - LFT(1) - LFT(2) }; \
                    sum = sum + ENT(0) + ENT(1) + ENT(2)
#else
#define SUM_SLOTS() u = used; sum = 0 - LFT(0); sum = sum - LFT(1); sum = sum - LFT(2); \
                    sum = sum + ENT(0); sum = sum + ENT(1); sum = sum + ENT(2)
#endif

/* Thread t's oldest buffered store reaches memory. */
inline flush_head(t) {
  if
  :: sb[t * CAP] == IN -> ent[t]++
  :: else -> lft[t]++
  fi;
  i = 0;
  do
  :: i + 1 < sbn[t] -> sb[t * CAP + i] = sb[t * CAP + i + 1]; i++
  :: else -> break
  od;
  sbn[t]--;
  sb[t * CAP + sbn[t]] = 0
}
inline drain_buffer(t) {
  do
  :: sbn[t] > 0 -> flush_head(t)
  :: else -> break
  od
}
/* A plain store by thread t (owner of slot t): into its buffer; a full buffer stalls. */
inline plain_store(t, kind) {
  atomic { sbn[t] < CAP -> sb[t * CAP + sbn[t]] = kind; sbn[t]++ }
}
/* Count in with an RMW (the owner's drains its buffer first). */
inline count_in_rmw(s) {
  atomic {
    if
    :: OWNED(s) -> drain_buffer(s)
    :: else -> skip
    fi;
    ent[s]++
  }
}
/* mark_used(): slot s's bit in `used`, by the thread counting through it (the
 * owner, for an owned slot): an RMW if not set yet, else only a load. */
inline mark_used(s) {
  atomic {
    if
    :: ((used >> (s)) & 1) == 0 ->
       if
       :: OWNED(s) -> drain_buffer(s)
       :: else -> skip
       fi;
       used = used | (1 << (s))
    :: else -> skip
    fi
  }
}
/* try_lock_shared's count-in: plain if the lock is biased to this thread; else
 * mark the slot, take the bias if nobody has (an owned slot only), then an RMW. */
inline count_in(s) {
  if
  :: OWNED(s) && bias == 2 + s -> plain_store(s, IN); plain = 1
  :: else ->
     plain = 0;
     MARK_IN(s);
     if
     :: OWNED(s) && bias == 0 ->
        atomic { drain_buffer(s); if :: bias == 0 -> bias = 2 + s :: else -> skip fi }
     :: else -> skip
     fi;
     count_in_rmw(s)
  fi
}
/* Count out: a plain store on an owned slot, else an RMW. */
inline count_out(s) {
  if
  :: OWNED(s) -> plain_store(s, OUT)
  :: else -> lft[s]++
  fi
}
/* sys_membarrier: every store buffer drained. */
inline membarrier() {
  atomic { drain_buffer(0); drain_buffer(1) }
}
/* revoke_foreign_bias(), by a writer holding W (never the biased thread here). */
inline revoke_bias() {
  if
  :: bias >= 2 -> bias = 1; REVOKE_BARRIER
  :: else -> skip
  fi
}

/* Store buffers drain at any time, also while their thread is parked. */
proctype Flusher() {
  byte i;
end:
  do
  :: atomic { sbn[0] > 0 -> flush_head(0) }
  :: atomic { sbn[1] > 0 -> flush_head(1) }
  od
}

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

inline remove(p) {   /* unlink p, wherever it is */
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

/* Writer's unlock_slow (and the undo of try_lock / a timed-out drain). */
inline unlock_slow(me) {
  assert(W == 1);
  lock_q();
  if
  :: qlen == 0 -> atomic { W = 0; Q = 0 }; unlock_q()
  :: else ->
     if
     :: handoff = 1
     :: handoff = 0
     fi;
     nwoken = 0; fw = 0; keep = 0;
     if
     :: !isshared[q[0]] ->
        woken[0] = q[0]; nwoken = 1; remove(woken[0]); keep = handoff
     :: else ->
        k = 0;
        do
        :: k < qlen ->
           if
           :: isshared[q[k]] ->
              woken[nwoken] = q[k]; nwoken++; remove(q[k]);
              if
              :: handoff -> ent[2]++           /* counted in on its behalf (shared slot) */
              :: else -> skip
              fi
           :: else ->
              if
              :: fw == 0 -> fw = q[k]; remove(fw)
              :: else -> k++
              fi
           fi
        :: else -> break
        od
     fi;
     atomic {                                  /* the state CAS loop */
       if
       :: keep -> skip
       :: else -> W = 0
       fi;
       Q = (qlen > 0)
     };
     k = 0;
     do
     :: k < nwoken ->
        if
        :: handoff -> mark[woken[k]] = 2
        :: else -> mark[woken[k]] = 1
        fi;
        unpark(woken[k]);
        k++
     :: else -> break
     od;
     if
     :: fw != 0 -> mark[fw] = 1; unpark(fw)
     :: else -> skip
     fi;
     unlock_q()
  fi
}

/* queue_behind_writer + await_taken: sets v to the mark, 0 timed out, 3 retry. */
inline queue_and_wait(me, shared, requeue, may_time_out) {
  lock_q();
  atomic {                                     /* CAS QUEUED in while WRITER is set */
    if
    :: W == 1 -> Q = 1; ok = 1
    :: else -> ok = 0
    fi
  };
  if
  :: ok ->
     mark[me] = 0;
     isshared[me] = shared;
     push(me, requeue);
     unlock_q();
     do
     :: mark[me] != 0 -> v = mark[me]; break
     :: else ->
        if
        :: permit[me] == 1 -> permit[me] = 0    /* park returned */
        :: may_time_out ->                      /* park_until timed out */
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

proctype Reader(byte me; byte enter_slot; byte leave_slot; bit may_time_out) {
  byte v, i, j, r = 0;
  bit requeue, got, ok, plain;
  do
  :: r < ROUNDS ->
     requeue = 0; got = 0;
     do
     :: W == 0 ->                               /* try_lock_shared */
        count_in(enter_slot);
        ok = (W == 0);
        if                                      /* biased, but revoked since: fence, look again */
        :: RECHECK_BIAS && ok && plain && bias != 2 + enter_slot ->
           atomic { drain_buffer(enter_slot) };
           ok = (W == 0)
        :: else -> skip
        fi;
        if
        :: ok -> got = 1; break
        :: else ->
           count_out(enter_slot);               /* back_off */
           if :: drainer != 0 -> unpark(drainer) :: else -> skip fi
        fi
     :: W == 1 ->
        if
        :: may_time_out -> break                /* the deadline passed before queueing */
        :: true ->
           queue_and_wait(me, 1, requeue, may_time_out);
           if
           :: v == 0 -> break
           :: v == 2 -> got = 1; break
           :: v == 1 -> requeue = 1
           :: v == 3 -> skip
           fi
        fi
     od;
     if
     :: got ->
        readers_in++;
        assert(writers_in == 0);
        readers_in--;
        if                                      /* migrating drains the old buffer */
        :: leave_slot != enter_slot && OWNED(enter_slot) -> atomic { drain_buffer(enter_slot) }
        :: else -> skip
        fi;
        MARK_OUT(leave_slot);                   /* unlock_shared */
        count_out(leave_slot);
        if
        :: W == 1 -> if :: drainer != 0 -> unpark(drainer) :: else -> skip fi
        :: else -> skip
        fi
     :: else -> skip
     fi;
     r++
  :: else -> break
  od;
  finished++
}

proctype Writer(byte me; bit may_time_out; bit try_first) {
  byte v, i, j, k, fw, nwoken, r = 0, u;
  byte woken[NP];
  short sum;
  bit requeue, got, handoff, keep, ok;
  do
  :: r < WROUNDS ->
     requeue = 0; got = 0;
     if
     :: try_first && r == 0 ->                  /* try_lock */
        atomic { if :: W == 0 -> W = 1; got = 1 :: else -> got = 0 fi };
        if
        :: got ->
           revoke_bias();
           SUM_SLOTS();
           if
           :: sum != 0 -> unlock_slow(me); got = 0
           :: else -> skip
           fi
        :: else -> skip
        fi;
        goto done
     :: else -> skip
     fi;
     do
     :: atomic { W == 0 -> W = 1 }; goto drain  /* barge for WRITER */
     :: W == 1 ->
        if
        :: may_time_out -> goto done
        :: true ->
           queue_and_wait(me, 0, requeue, may_time_out);
           if
           :: v == 0 -> goto done
           :: v == 2 -> goto drain               /* handed WRITER */
           :: v == 1 -> requeue = 1
           :: v == 3 -> skip
           fi
        fi
     od;
drain:
     revoke_bias();
     do
     :: SUM_SLOTS();
        if
        :: sum == 0 -> break
        :: else ->
           assert(sum > 0);
           drainer = me;
           MEMBARRIER_BEFORE_PARK;
           SUM_SLOTS();
           if
           :: sum == 0 -> break
           :: else ->
              if
              :: permit[me] == 1 -> permit[me] = 0
              :: may_time_out ->
                 SUM_SLOTS();
                 if
                 :: sum != 0 -> drainer = 0; unlock_slow(me); goto done
                 :: else -> break
                 fi
              fi
           fi
        fi
     od;
     drainer = 0;
     got = 1;
done:
     if
     :: got ->
        writers_in++;
        assert(writers_in == 1 && readers_in == 0);
        writers_in--;
        if
        :: atomic { W == 1 && Q == 0 -> W = 0 }  /* unlock fast path */
        :: Q == 1 -> unlock_slow(me)
        fi
     :: else -> skip
     fi;
     r++
  :: else -> break
  od;
  finished++
}

init {
  byte i;
  atomic {
    run Flusher();
    run Reader(1, 0, 1, 0);                      /* migrates: enters slot 0, leaves slot 1 */
    if
    :: NR > 1 -> run Reader(2, 1, 2, 1)         /* enters owned slot 1, leaves the shared one */
    :: else -> skip
    fi;
    run Writer(NR + 1, W1_MAY_TIME_OUT, W1_TRY_FIRST);
    if
    :: NW > 1 -> run Writer(NR + 2, 1, 1)
    :: else -> skip
    fi
  };
  finished == NR + NW;
  assert(W == 0 && Q == 0 && qlen == 0 && lk == 0);
  membarrier();
  assert(ent[0] + ent[1] + ent[2] == lft[0] + lft[1] + lft[2])
}
