/* SPIN model of the segment list's free list (sync/tessera/detail/
 * segment_list.h: release() and pop_free()): reclaimed segments kept for
 * reuse, taken by an operation that needs a new segment, with no operation
 * ever waiting for another.
 *
 *  - push (release): anyone, any time; read the head, point the segment's
 *    free_next at it, CAS the head from what was read to the segment; retry
 *    on failure.
 *  - pop (pop_free): try the pop lock (for about a microsecond: modelled as
 *    one try, since any try may find it taken); if another caller holds it,
 *    give up (the caller allocates a fresh segment instead). Holding it: read
 *    the head; if null, unlock and give up; else CAS the head from it to its
 *    free_next, rereading the head on failure; unlock. (A fresh segment is on
 *    no list until it is linked, so it is not modelled.)
 *
 * Processes: NP callers, each ROUNDS times either pushing a segment it owns
 * or popping one. At the start the list holds the segments 0..NS-1 (segment
 * NS-1 on top) and no caller owns one. Each statement that touches shared
 * state is atomic, as the seq_cst/acq_rel RMWs and loads are; a plain field
 * (free_next) is written by its owner only.
 *
 * Checked:
 *  - a pop takes a segment that is on the list, and only one caller owns a
 *    segment at a time (no segment handed out twice: the ABA of a lock-free
 *    stack's pop);
 *  - at the end the list is a chain without cycles holding exactly the
 *    segments nobody owns (none lost);
 *  - nobody waits: every caller ends (no invalid end state), whatever the
 *    others do.
 * Mutations that must be caught: -DNO_POP_LOCK (pops without the lock: one
 * pop reads the head A and its next B, another pops A and B and pushes A
 * back, and the first CAS succeeds, putting B, owned, back on top) and
 * -DLINK_AFTER_CAS (a push publishes the segment before it points its
 * free_next at the old head: a pop in between takes a stale next).
 */
#ifndef NP
#define NP 3
#endif
#ifndef NS
#define NS 3
#endif
#ifndef ROUNDS
#define ROUNDS 3
#endif
#define NIL 255
#define ONLIST 254

byte head = NS - 1;
byte next[NS];
byte owner[NS];  /* ONLIST, or the caller's id */
bit pop_lock = 0;
byte ended = 0;

inline push(me, s) {
  byte top;
  owner[s] = ONLIST;  /* from here the list may hand it out */
  do
  :: atomic { top = head };
#ifdef LINK_AFTER_CAS
     if
     :: atomic { head == top -> head = s };
        next[s] = top;
        break
     :: atomic { head != top -> skip }
     fi
#else
     next[s] = top;
     if
     :: atomic { head == top -> head = s }; break
     :: atomic { head != top -> skip }
     fi
#endif
  od
}

inline pop(me) {
  byte top, nx;
#ifndef NO_POP_LOCK
  if
  :: atomic { pop_lock == 0 -> pop_lock = 1 };
#else
  if
  :: true ->
#endif
     atomic { top = head };
     do
     :: top == NIL -> break
     :: top != NIL ->
        nx = next[top];
        if
        :: atomic { head == top -> head = nx;
                    assert(owner[top] == ONLIST);  /* on the list when taken */
                    owner[top] = me };
           break
        :: atomic { head != top -> top = head }
        fi
     od;
#ifndef NO_POP_LOCK
     pop_lock = 0
  :: atomic { pop_lock == 1 -> skip }  /* taken: allocate instead */
#endif
  fi
}

proctype caller(byte me) {
  byte r = 0, s;
  do
  :: r == ROUNDS -> break
  :: r < ROUNDS ->
     r++;
     /* push a segment this caller owns, if any, or pop */
     s = 0;
     do
     :: s < NS && owner[s] != me -> s++
     :: s < NS && owner[s] == me -> break
     :: s == NS -> break
     od;
     if
     :: s < NS -> push(me, s)
     :: true -> pop(me)
     fi
  od;
  ended++
}

init {
  byte i, p, n, k;
  atomic {
    i = 0;
    do
    :: i < NS -> owner[i] = ONLIST; if :: i == 0 -> next[i] = NIL :: else -> next[i] = i - 1 fi; i++
    :: i == NS -> break
    od;
    i = 0;
    do
    :: i < NP -> run caller(i); i++
    :: i == NP -> break
    od
  }
  ended == NP;
  /* The list: a chain without cycles holding exactly the unowned segments. */
  p = head; n = 0;
  do
  :: p == NIL -> break
  :: p != NIL -> assert(owner[p] == ONLIST); n++; assert(n <= NS); p = next[p]
  od;
  k = 0; i = 0;
  do
  :: i < NS -> if :: owner[i] == ONLIST -> k++ :: else -> skip fi; i++
  :: i == NS -> break
  od;
  assert(n == k)
}
