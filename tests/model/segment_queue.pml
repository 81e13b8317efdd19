/* SPIN model of counting_semaphore's admission::faa: Koval & Elizarov's
 * fetch-and-add semaphore (include/tessera/detail/faa_semaphore.h,
 * sync/faa_semaphore.cpp) on the segment queue synchronizer
 * (include/tessera/detail/segment_queue.h, sync/segment_queue.cpp): the cell
 * states (EMPTY, a waiter, PERMIT, TAKEN, CANCELLED, BROKEN), suspend and
 * resume with asynchronous and (-DSYNC) synchronous resumption, simple cancellation (a waiter whose deadline passes
 * CASes its cell to CANCELLED; the release that meets the cell fails its
 * resume and adds another permit), and segment reclamation: the hold counts
 * (raise, then check the pointer again), walking forward holding, the
 * pointers moving forward, and the in-order reclaimer under its try-lock.
 *
 * Processes: NP acquirers, R rounds each of acquire + release(1) on a
 * semaphore of INIT permits; acquirer 0 uses try_acquire_until and may time
 * out whenever it is parked. SEG cells per segment (1: every operation moves
 * a pointer, the most reclamation). Each atomic block is one RMW or CAS of the
 * implementation; plain loads are statements of their own.
 *
 * Checked:
 *  - never more holders than INIT;
 *  - no reclaimed segment is read (its cells, its id, its next: in the code it
 *    may have been reused as a new segment) by an operation holding it;
 *  - no lost wake-up: every process terminates (invalid end states);
 *  - at the end: every cell not dequeued is CANCELLED (a timed-out waiter's
 *    debt) and permits + those cells == INIT (no permit lost or made).
 * With -DSYNC the releases resume synchronously, as blocking_pool's put()
 * does: a resume that finds its cell EMPTY may wait for the suspender or give
 * up and break the cell (BROKEN); the suspender that then comes starts its
 * acquire over (the release's increment paid its decrement back), and the
 * release goes round again as at a cancelled cell.
 * With -DREMOVE a segment whose cells are all cancelled (or broken) is
 * unlinked from the middle of the list, unless it is the newest or a
 * pointer names it, and retired; the scan in id order reuses a retired
 * segment once none up to it is held and no pointer names a retired segment
 * at or before it. A resume whose segment was removed lands on a later one
 * and fails as at a cancelled cell.
 * Mutations that must be caught (run_model.sh): -DNO_RETRY (a release whose
 * resume meets a cancelled cell gives up), -DNO_VALIDATE (hold() does not
 * check the pointer again after raising the count), -DIGNORE_HOLDS (the
 * reclaimer does not look at the counts), with SYNC -DBROKEN_TAKEN (a
 * suspender takes a broken cell as a hand-over), with REMOVE -DNO_POINTER_CHECK
 * (a retired segment is reused although a pointer names a retired one at or
 * before it) and -DNO_ID_CHECK (a resume that lands past a removed segment
 * uses the cell of its index in the segment it landed on).
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
#ifndef SEG
#define SEG 1
#endif
#ifndef MAXB
#define MAXB 2  /* SYNC: cells broken in all (a resume past that waits) */
#endif
#ifdef SYNC
#define NC (NP * R + 1 + MAXB)  /* a broken cell costs one more on each side */
#else
#define NC (NP * R + 1)
#endif
#define NSEG (NC / SEG + 2)
#define EMPTY 0
#define PERMIT 1
#define TAKEN 2
#define CANCELLED 3
#define BROKEN 4
#define W(p) (5 + (p))

byte cell[NC];
short permits = INIT;
byte enq = 0;
byte deq = 0;
byte tailp = 0;             /* tail_: the enqueue side's segment */
byte headp = 0;             /* head_: the dequeue side's segment */
byte holds[NSEG];
bit freed[NSEG];
byte first = 0;             /* first_: oldest live segment */
byte top = 0;               /* the newest segment linked (no next yet) */
byte nxt[NSEG];             /* next pointers (x + 1 until a removal) */
byte ccnt[NSEG];            /* cancelled cells per segment */
bit retired[NSEG];
bit lk = 0;                 /* lock_ (try_lock in reclaim) */
bit pm[NP];                 /* each process's park permit */
byte inside = 0;
byte breaks = 0;
byte finished = 0;

/* hold(): raise the count of the segment `ptr` names, check it still does. */
inline hold(ptr, s) {
  do
  :: s = ptr;
     holds[s]++;
#ifdef NO_VALIDATE
     break
#else
     if
     :: ptr == s -> break
     :: else -> holds[s]--
     fi
#endif
  od
}

inline reclaim() {
  atomic { if :: lk == 0 -> lk = 1; got_lock = 1 :: else -> got_lock = 0 fi };
  if
  :: got_lock ->
     passed = headp;
     if :: tailp < passed -> passed = tailp :: else -> skip fi;
#ifdef REMOVE
     /* unlink_cancelled(): from first along the chain, but the newest */
     x = first; pv = 255;
     do
     :: x >= top -> break
     :: else ->
        n = nxt[x];
        if
        :: ccnt[x] == SEG && x != headp && x != tailp ->
           if :: pv == 255 -> first = n :: else -> nxt[pv] = n fi;
           retired[x] = 1
        :: else -> pv = x
        fi;
        x = n
     od;
     /* one scan in id order, stopping at the first held segment */
     x = 0; in_order = 1;
     do
     :: x > top -> break
     :: x <= top && freed[x] -> x++
     :: x <= top && !freed[x] ->
        h = holds[x];
#ifdef IGNORE_HOLDS
        h = 0;
#endif
        if
        :: h != 0 -> break
        :: h == 0 && retired[x] ->
#ifdef NO_POINTER_CHECK
           freed[x] = 1;
#else
           if
           :: !(retired[headp] && headp <= x) && !(retired[tailp] && tailp <= x) -> freed[x] = 1
           :: else -> skip
           fi;
#endif
           x++
        :: h == 0 && !retired[x] && in_order && x == first && x < passed ->
           first = nxt[x]; freed[x] = 1; x++
        :: h == 0 && !retired[x] && !(in_order && x == first && x < passed) ->
           in_order = 0; x++
        fi
     od;
#else
     do
     :: first < passed ->
        h = holds[first];
#ifdef IGNORE_HOLDS
        h = 0;
#endif
        if
        :: h == 0 -> freed[first] = 1; first++
        :: else -> break
        fi
     :: else -> break
     od;
#endif
     lk = 0
  :: else -> skip
  fi
}

/* walk(): from held segment s to segment `target`, holding each next one
 * before dropping the last; then move `ptr` forward (CAS) and reclaim. */
inline walk(s, target, ptr) {
  do
  :: assert(!freed[s]);  /* a reclaimed segment may be reused: its id and next are not ours */
     if
     :: s < target ->
        atomic { if :: s == top -> top = s + 1 :: else -> skip fi; n = nxt[s] };
        holds[n]++; holds[s]--; s = n
     :: else -> break
     fi
  od;
  atomic { if :: ptr < s -> ptr = s; moved = 1 :: else -> moved = 0 fi };
  if :: moved -> reclaim() :: else -> skip fi
}

/* cancelled(): one more dead cell of segment sg (held); the last asks for
 * its removal. */
inline cancelled_cell(sg) {
#ifdef REMOVE
  ccnt[sg]++;
  if :: ccnt[sg] == SEG -> reclaim() :: else -> skip fi
#else
  skip
#endif
}

inline suspend(me, timed) {
  hold(tailp, s);
  atomic { i = enq; enq++ };
  walk(s, i / SEG, tailp);
  assert(s == i / SEG);  /* a segment is removed only after all its suspenders */
  assert(!freed[i / SEG]);
  atomic { if :: cell[i] == EMPTY -> cell[i] = W(me); installed = 1 :: else -> installed = 0 fi };
  if
  :: !installed && cell[i] == BROKEN ->   /* a sync resume gave up on us */
#ifdef BROKEN_TAKEN
     got = 1
#else
     broken = 1;
     cancelled_cell(i / SEG)
#endif
  :: !installed && cell[i] != BROKEN ->
     assert(cell[i] == PERMIT);   /* a resume came first */
     cell[i] = TAKEN;
     got = 1
  :: else ->
     do
     :: assert(!freed[i / SEG]);
        if
        :: cell[i] != W(me) -> assert(cell[i] == TAKEN); got = 1; break
        :: else -> skip
        fi;
        /* still ours: park */
        if
        :: pm[me] -> pm[me] = 0   /* park returns (maybe spuriously) */
        :: timed ->               /* park_until: the deadline passed */
           assert(!freed[i / SEG]);
           atomic { if :: cell[i] == W(me) -> cell[i] = CANCELLED; got = 0
                        :: else -> got = 1 fi };
           if :: !got -> cancelled_cell(i / SEG) :: else -> skip fi;
           break
        fi
     od
  fi;
  holds[s]--
}

inline resume(ok) {
  hold(headp, s);
  atomic { i = deq; deq++ };
  walk(s, i / SEG, headp);
  assert(!freed[s]);
#ifdef NO_ID_CHECK
  i = s * SEG + i % SEG;
#endif
  if
  :: s != i / SEG -> ok = 0   /* i's segment was removed: a cancelled cell */
  :: else ->
#ifdef SYNC
  /* Wait a while for the suspender (a spin: any number of its steps), then
   * break the cell if it is still EMPTY. Past MAXB breaks the spin is long
   * enough (it waits): the search stays finite. */
  atomic {
    if
    :: cell[i] == EMPTY && breaks < MAXB -> cell[i] = BROKEN; seen = BROKEN; breaks++
    :: cell[i] != EMPTY -> seen = cell[i]
    fi
  };
  if
  :: seen == BROKEN -> ok = 0
  :: else ->
#else
  atomic { if :: cell[i] == EMPTY -> cell[i] = PERMIT; seen = EMPTY :: else -> seen = cell[i] fi };
  if
  :: seen == EMPTY -> ok = 1
  :: else ->
#endif
     atomic { if :: seen >= 5 && cell[i] == seen -> cell[i] = TAKEN; ok = 1
                  :: else -> ok = 0 fi };
     if :: ok -> pm[seen - 5] = 1 :: else -> assert(cell[i] == CANCELLED) fi
  fi
  fi;
  holds[s]--
}

proctype acquirer(byte me; bit timed) {
  byte s, i, passed, h, seen, x, n, pv, round = 0;
  bit got, installed, moved, got_lock, ok, broken, in_order;
  short p;
  do
  :: round < R ->
     do
     :: atomic { p = permits; permits-- };
        broken = 0;
        if
        :: p > 0 -> got = 1
        :: else -> suspend(me, timed)
        fi;
        if :: !broken -> break :: else -> skip fi  /* start over */
     od;
     if
     :: got ->
        atomic { inside++; assert(inside <= INIT) };
        inside--;
        /* release(1) */
        atomic { p = permits; permits++ };
        do
        :: p >= 0 -> break
        :: else ->
           resume(ok);
           if
           :: ok -> break
           :: else ->
#ifdef NO_RETRY
              break
#else
              atomic { p = permits; permits++ }
#endif
           fi
        od
     :: else -> skip
     fi;
     round++
  :: else -> break
  od;
  finished++
}

init {
  byte k;
  atomic {
    k = 0;
    do
    :: k < NSEG -> nxt[k] = k + 1; k++
    :: else -> break
    od;
    run acquirer(0, 1);
    k = 1;
    do
    :: k < NP -> run acquirer(k, 0); k++
    :: else -> break
    od
  };
  finished == NP;
  /* Quiescent: cells not dequeued are timed-out waiters' debts, and no
   * dequeued cell still holds a hand-over nobody took. */
  k = 0;
  do
  :: k < deq -> assert(cell[k] != PERMIT && cell[k] != EMPTY); k++
  :: else -> break
  od;
  k = deq;
  do
  :: k < enq -> assert(cell[k] == CANCELLED); k++
  :: else -> break
  od;
  assert(enq >= deq);
  assert(permits + (enq - deq) == INIT)
}
