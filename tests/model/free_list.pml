/* SPIN model of the segment list's free list (include/tessera/detail/
 * segment_list.h: release() and pop_free()): reclaimed segments kept for
 * reuse, a lock-free stack whose head word carries the top segment and a
 * count of the changes made to it.
 *
 *  - push (release): read the head; point the segment's link at the head's
 *    segment; CAS the head from what was read to (segment, count + 1);
 *    retry on failure.
 *  - pop (pop_free): read the head; if it names no segment, give up (the
 *    caller allocates); read that segment's link (it may be stale: the
 *    segment may have been popped, even pushed again, since); CAS the head
 *    from what was read to (link, count + 1); retry on failure.
 *
 * Processes: NP callers, each ROUNDS times either pushing a segment it owns
 * or popping one. At the start the list holds the segments 0..NS-1 (segment
 * NS-1 on top) and no caller owns one. Each read and CAS of the head and
 * each access to a link is one atomic step. The count is exact here (the
 * real one wraps after 2^22 changes; the header says why that is safe).
 *
 * Checked:
 *  - a pop takes a segment that is on the list, and only one caller owns a
 *    segment at a time (no segment handed out twice: the ABA of a lock-free
 *    stack's pop);
 *  - at the end the list is a chain without cycles holding exactly the
 *    segments nobody owns (none lost);
 *  - nobody waits: every caller ends (no invalid end state).
 * Mutations that must be caught: -DNO_COUNT (the head carries no count: one
 * pop reads the head A and its link B, another pops A and B and pushes A
 * back, and the first CAS succeeds, putting B, owned, back on top) and
 * -DLINK_AFTER_CAS (a push publishes the segment before it points its link
 * at the old head: a pop in between takes a stale link).
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
byte count = 0;    /* the head word's count of changes */
byte link[NS];
byte owner[NS];    /* ONLIST, or the caller's id */
byte ended = 0;

#ifdef NO_COUNT
#define BUMP skip
#else
#define BUMP count++
#endif

inline push(me, s) {
  byte top, c;
  owner[s] = ONLIST;  /* from here the list may hand it out */
  do
  :: atomic { top = head; c = count };
#ifdef LINK_AFTER_CAS
     if
     :: atomic { head == top && count == c -> head = s; BUMP };
        link[s] = top;
        break
     :: atomic { !(head == top && count == c) -> skip }
     fi
#else
     link[s] = top;
     if
     :: atomic { head == top && count == c -> head = s; BUMP }; break
     :: atomic { !(head == top && count == c) -> skip }
     fi
#endif
  od
}

inline pop(me) {
  byte top, c, nx;
  atomic { top = head; c = count };
  do
  :: top == NIL -> break  /* empty: allocate instead */
  :: top != NIL ->
     nx = link[top];
     if
     :: atomic { head == top && count == c -> head = nx; BUMP;
                 assert(owner[top] == ONLIST);  /* on the list when taken */
                 owner[top] = me };
        break
     :: atomic { !(head == top && count == c) -> top = head; c = count }
     fi
  od
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
    :: i < NS -> owner[i] = ONLIST; if :: i == 0 -> link[i] = NIL :: else -> link[i] = i - 1 fi; i++
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
  :: p != NIL -> assert(owner[p] == ONLIST); n++; assert(n <= NS); p = link[p]
  od;
  k = 0; i = 0;
  do
  :: i < NS -> if :: owner[i] == ONLIST -> k++ :: else -> skip fi; i++
  :: i == NS -> break
  od;
  assert(n == k)
}
