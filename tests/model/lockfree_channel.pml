/* SPIN model of lockfree_channel<T>'s cells (include/tessera/lockfree_channel.h),
 * a buffered channel of capacity C: the send, receive and buffer-end indices
 * (fetch-and-add), the cell states EMPTY, IN_BUFFER, BUFFERED, a waiting
 * sender or receiver, BUSY, DONE, SENDER_GONE, RECEIVER_GONE and CLOSED, the
 * expansion of the buffer's end (marking a cell whether or not its sender
 * has come, or only if it has, and its retry past a cell whose sender gave
 * up), timed waits on both sides, a receive that pays its move before it
 * registers (an OS thread's poll) or after, and close(): the send index's
 * closed bit, then the frozen index published for receives, then the cells
 * between the indices broken. With -DPOLL, a waiter may poll its cell after
 * it registers (an OS thread), and a server that reads, after its claim,
 * that it still polls does not unpark it. Segments are not modelled: the
 * cells sit in a segment_list, whose hold protocol and reclamation
 * tests/model/segment_queue.pml checks.
 *
 * Processes: NS senders, each sending one distinct value (sender 0 may time
 * out with TIMED_SEND), NR receivers (receiver 0 may time out with
 * TIMED_RECV), and with CLOSE a closer that closes the channel at any moment.
 * The configurations have work for everyone (NS <= NR + C, and NR <= NS
 * unless a close comes), so a process left waiting is a lost wake-up. Each atomic block is
 * one RMW or CAS of the implementation; plain loads are statements of their
 * own.
 *
 * Checked at the end: every value is exactly once received, still BUFFERED in
 * a cell, or back with its sender — and only a timed-out or closed send keeps
 * its value; a receive fails only by its deadline or a close; no waiter is
 * stuck (invalid end states); no waiter's record is read after it left.
 * Mutations that must be caught (run_model.sh): -DNO_IN_BUFFER (the buffer's
 * end passes an EMPTY cell without marking it, so its sender waits with room
 * in the buffer), -DNO_BUSY (a counterpart takes a waiting sender's value
 * without claiming the cell first, racing the sender's timeout: it reads the
 * record after the sender left), -DCLOSE_SENDERS_ONLY (close() breaks only
 * the cells below the frozen send index, leaving receivers past it waiting),
 * -DLATE_PUBLISH (close() reads the receive index before it publishes the
 * frozen one: a receive between the two reads neither, and waits for ever),
 * -DPOLL_BEFORE_CLAIM with -DPOLL (a sender reads whether the receiver it
 * serves polls before it claims the cell: the receiver stops polling, sees
 * its cell unserved, parks, and is never unparked).
 * (-DNO_RETRY, the expansion not going on past a cell whose sender gave up,
 * needs a fourth sender to show, more than the model's size allows.)
 */
#ifndef NS
#define NS 2
#endif
#ifndef NR
#define NR 2
#endif
#ifndef C
#define C 1
#endif
#define NC 8
#define EMPTY 0
#define BUFFERED 1
#define DONE 2
#define SENDER_GONE 3
#define RECEIVER_GONE 4
#define CLOSED 6
#define BUSY 7
#define IN_BUFFER 8
#define SW(p) (16 + (p))      /* sender p waits here */
#define RW(p) (32 + (p))      /* receiver p waits here */
#define KEPT 1
#define SENT 2

byte cell[NC];
byte cval[NC];                /* the value a BUFFERED cell holds */
byte S = 0;
byte R = 0;
byte B = C;
bit closed = 0;               /* the send index's closed bit */
byte closed_at = 255;
bit published = 0;            /* closed_at_ stored: what a receive reads */
byte sval[NS];                /* a waiting sender's value (0 once it left) */
byte rgot[NR];                /* what receiver p was given (its std::optional) */
byte rend[NR];                /* receiver p: 1 got a value, 2 timeout, 3 closed */
byte send_end[NS];            /* sender p: SENT or KEPT */
bit spm[NS];                  /* park permits */
bit rpm[NR];
bit spoll[NS];                /* the waiter still polls its cell: no unpark needed */
bit rpoll[NR];
byte finished = 0;

/* A server reads whether the waiter it claimed still polls after its claim;
 * -DPOLL_BEFORE_CLAIM reads it before (at the sender serving a receiver). */
#if defined(POLL) && defined(POLL_BEFORE_CLAIM)
#define EARLY(a) a
#define LATE(a) skip
#elif defined(POLL)
#define EARLY(a) skip
#define LATE(a) a
#else
#define EARLY(a) skip
#define LATE(a) skip  /* pl stays 0: every server unparks */
#endif
/* With -DPOLL a waiter may poll its cell after it registers (an OS thread):
 * a server that finds it polling does not unpark it. And a waiter that sees
 * its cell still its own parks until a permit comes, so that a wake-up
 * lost to the polling flag leaves it stuck (an invalid end state); without
 * POLL it may look at its cell at any time, a smaller state space. */
#ifdef POLL
#define POLLS(v) if :: v = 1 :: v = 0 fi
#define POLL_ONLY(a) a
#else
#define POLLS(v) v = 0
#define POLL_ONLY(a) skip
#endif
/* Wakes waiter x of `pm` unless it was polling (`pl`, read after the claim). */
#define WAKE(pm, x) if :: !pl -> pm[x] = 1 :: else -> skip fi

/* The caller declares b, lim, est, wasted, ok, pl (bytes/bits). An OS thread
 * marks the cell whether or not its sender has come; a fiber leaves a cell
 * whose sender has not come (that sender finds b inside the buffer). */
inline expand() {
  do
  :: atomic { b = B; B++ };
     atomic { lim = (closed -> closed_at : S) };
     if
     :: b >= lim -> break   /* a fiber's expansion */
     :: true -> skip         /* an OS thread's */
     fi;
     assert(b < NC);
     wasted = 0;
     do
     :: est = cell[b];
        if
        :: est == EMPTY ->
#ifdef NO_IN_BUFFER
           break
#else
           atomic { if :: cell[b] == EMPTY -> cell[b] = IN_BUFFER; ok = 1 :: else -> ok = 0 fi };
           if :: ok -> break :: else -> skip fi
#endif
        :: est >= SW(0) && est < SW(NS) ->
           atomic { if :: cell[b] == est -> cell[b] = BUSY; ok = 1 :: else -> ok = 0 fi };
           if
           :: ok ->
              LATE(pl = spoll[est - SW(0)]);
              cval[b] = sval[est - SW(0)]; assert(cval[b] != 0);
              cell[b] = BUFFERED; WAKE(spm, est - SW(0));
              break
           :: else -> skip
           fi
        :: est == BUSY -> skip   /* a receiver is taking from the sender here */
        :: est == SENDER_GONE -> wasted = 1; break
        :: else -> break
        fi
     od;
#ifdef NO_RETRY
     break
#else
     if :: wasted -> skip :: else -> break fi
#endif
  od
}

proctype sender(byte p) {
  byte s, st, sraw;
  bit was_closed, pl;
again:
  atomic { s = S; S++; was_closed = closed };
  if
  :: was_closed -> send_end[p] = KEPT; goto fin
  :: else -> skip
  fi;
  assert(s < NC);
  st = cell[s];
look:
  if
  :: st >= RW(0) && st < RW(NR) ->
     EARLY(pl = rpoll[st - RW(0)]);
     atomic { if :: cell[s] == st -> cell[s] = BUSY :: else -> st = cell[s]; goto look fi };
     LATE(pl = rpoll[st - RW(0)]);
     rgot[st - RW(0)] = p + 1; cell[s] = DONE; WAKE(rpm, st - RW(0));
     send_end[p] = SENT; goto fin
  :: st == IN_BUFFER || st == EMPTY ->
     byte bb, rr;
     bb = B; rr = R;
     if
     :: st == IN_BUFFER || s < bb || s < rr ->
        cval[s] = p + 1;
        atomic { if :: cell[s] == st -> cell[s] = BUFFERED; send_end[p] = SENT :: else -> st = cell[s] fi };
        if :: send_end[p] == SENT -> goto fin :: else -> goto look fi
     :: else ->
        sval[p] = p + 1;
        /* An OS thread polls its cell first (pl), a fiber does not. */
        POLLS(pl);
        atomic { if :: cell[s] == EMPTY -> cell[s] = SW(p); spoll[p] = pl :: else -> st = cell[s]; sval[p] = 0; goto look fi };
        POLL_ONLY(spoll[p] = 0);  /* the poll is over: from here a server unparks */
        do
#ifdef POLL
        :: cell[s] == SW(p) ->  /* park until a permit (or the deadline) */
           if
           :: spm[p] -> spm[p] = 0
#ifdef TIMED_SEND
           :: p == 0 -> skip
#endif
           fi
#else
        :: cell[s] == SW(p) && spm[p] -> spm[p] = 0
#endif
#ifdef TIMED_SEND
        :: p == 0 -> atomic { if :: cell[s] == SW(p) -> cell[s] = SENDER_GONE; sval[p] = 0; send_end[p] = KEPT; goto fin :: else -> skip fi }
#endif
        :: cell[s] != SW(p) && cell[s] != BUSY -> break
        od;
        st = cell[s];
        sval[p] = 0;  /* the record is gone once we return */
        if
        :: st == DONE || st == BUFFERED -> send_end[p] = SENT
        :: st == CLOSED -> send_end[p] = KEPT
        :: else -> assert(false)
        fi;
        goto fin
     fi
  :: st == CLOSED -> send_end[p] = KEPT; goto fin
  :: else -> goto again  /* RECEIVER_GONE */
  fi;
fin:
  atomic { finished++ }
}

/* The move of the buffer's end that receive index r owes, once. */
inline pay() {
  if :: !paid -> expand(); paid = 1 :: else -> skip fi
}

proctype receiver(byte p) {
  byte r, st, b, lim, est;
  bit past, wasted, ok, paid, pl;
again:
  paid = 0;
  atomic { r = R; R++ };
  atomic { past = published && r >= closed_at };
  if :: past -> rend[p] = 3; goto fin :: else -> skip fi;
  assert(r < NC);
  st = cell[r];
look:
  if
  :: st == BUFFERED ->
     rgot[p] = cval[r]; cval[r] = 0; cell[r] = DONE; rend[p] = 1; pay(); goto fin
  :: st >= SW(0) && st < SW(NS) ->
#ifndef NO_BUSY
     atomic { if :: cell[r] == st -> cell[r] = BUSY :: else -> st = cell[r]; goto look fi };
     LATE(pl = spoll[st - SW(0)]);
     rgot[p] = sval[st - SW(0)]; assert(rgot[p] != 0);
     cell[r] = DONE;
#else
     atomic { if :: cell[r] == st -> cell[r] = DONE :: else -> st = cell[r]; goto look fi };
     LATE(pl = spoll[st - SW(0)]);
     rgot[p] = sval[st - SW(0)]; assert(rgot[p] != 0);
#endif
     WAKE(spm, st - SW(0)); rend[p] = 1; pay(); goto fin
  :: st == BUSY -> st = cell[r]; goto look
  :: st == EMPTY || st == IN_BUFFER ->
     /* An OS thread pays its move first and waits for the value before it
      * registers (its poll); either way it pays before it waits. */
     if :: !paid -> pay(); st = cell[r]; goto look :: true -> skip fi;
     /* An OS thread that did not poll before it registered polls now (pl),
      * one that did and a fiber do not. */
     POLLS(pl);
     atomic { if :: cell[r] == st -> cell[r] = RW(p); rpoll[p] = pl :: else -> st = cell[r]; goto look fi };
     pay();
     POLL_ONLY(rpoll[p] = 0);  /* the poll is over: from here a server unparks */
     do
#ifdef POLL
     :: cell[r] == RW(p) ->  /* park until a permit (or the deadline) */
        if
        :: rpm[p] -> rpm[p] = 0
#ifdef TIMED_RECV
        :: p == 0 -> skip
#endif
        fi
#else
     :: cell[r] == RW(p) && rpm[p] -> rpm[p] = 0
#endif
#ifdef TIMED_RECV
     :: p == 0 -> atomic { if :: cell[r] == RW(p) -> cell[r] = RECEIVER_GONE; rend[p] = 2; goto fin :: else -> skip fi }
#endif
     :: cell[r] != RW(p) && cell[r] != BUSY -> break
     od;
     if
     :: cell[r] == DONE -> rend[p] = 1
     :: cell[r] == CLOSED -> goto again
     :: else -> assert(false)
     fi;
     goto fin
  :: st == SENDER_GONE -> goto again  /* the expansion that meets it goes on */
  :: else -> pay(); goto again  /* CLOSED */
  fi;
fin:
  atomic { finished++ }
}

proctype closer() {
  byte r, lo, hi, i, st;
  bit pl;
  atomic { closed = 1; closed_at = S };
#ifndef LATE_PUBLISH
  published = 1;
  r = R;
#else
  r = R;
  published = 1;
#endif
  lo = (r < closed_at -> r : closed_at);
#ifdef CLOSE_SENDERS_ONLY
  hi = closed_at;
#else
  hi = (r < closed_at -> closed_at : r);
#endif
  i = lo;
  do
  :: i < hi ->
     st = cell[i];
     if
     :: st == EMPTY || st == IN_BUFFER ->
        atomic { if :: cell[i] == st -> cell[i] = CLOSED; i++ :: else -> skip fi }
     :: st >= SW(0) ->
        atomic { if :: cell[i] == st -> cell[i] = BUSY :: else -> goto next fi };
        LATE(if :: st >= RW(0) -> pl = rpoll[st - RW(0)] :: else -> pl = spoll[st - SW(0)] fi);
        cell[i] = CLOSED;
        if :: st >= RW(0) -> WAKE(rpm, st - RW(0)) :: else -> WAKE(spm, st - SW(0)) fi;
        i++
     :: st == BUSY -> skip
     :: else -> i++
     fi;
next:
     skip
  :: else -> break
  od;
  atomic { finished++ }
}

init {
  byte k;
  atomic {
    k = 0;
    do :: k < NS -> run sender(k); k++ :: else -> break od;
    k = 0;
    do :: k < NR -> run receiver(k); k++ :: else -> break od;
#ifdef CLOSE
    run closer();
#endif
  }
#ifdef CLOSE
  finished == NS + NR + 1;
#else
  finished == NS + NR;
#endif
  /* Every value exactly once: received, buffered, or kept by its sender. */
  byte v, n, i;
  v = 1;
  do
  :: v <= NS ->
     n = 0;
     i = 0;
     do :: i < NR -> if :: rend[i] == 1 && rgot[i] == v -> n++ :: else -> skip fi; i++ :: else -> break od;
     i = 0;
     do :: i < NC -> if :: cell[i] == BUFFERED && cval[i] == v -> n++ :: else -> skip fi; i++ :: else -> break od;
     if :: send_end[v - 1] == KEPT -> n++ :: else -> skip fi;
     assert(n == 1);
     v++
  :: else -> break
  od;
#ifndef CLOSE
  /* Without a close, only a deadline makes an operation fail. */
  k = 0;
  do
  :: k < NS -> assert(send_end[k] == SENT || k == 0); k++
  :: else -> break
  od;
  k = 0;
  do
  :: k < NR -> assert(rend[k] == 1 || rend[k] == 2); k++
  :: else -> break
  od
#endif
}
