/* SPIN model of select() over lock-free channels (sync/select.cpp,
 * include/tessera/select.h, include/tessera/lockfree_channel.h,
 * include/tessera/detail/select_node.h): the claim in the cells, with its
 * registration phase and the re-registration of bounced cases.
 *
 * Two rendezvous channels of K cells each; a send index and a receive index
 * per channel (fetch-and-add); the k-th send and the k-th receive meet in
 * cell k. A cell is EMPTY, BUSY (being served), DONE, SENDER_GONE,
 * RECEIVER_GONE, a plain sender's record (holding its value) or a select's
 * record. Every select has one case per channel, all sends or all receives.
 *
 * A select's claim word starts REG. It registers its two cases in a random
 * order: each takes an index; a cell with a counterpart waiting is served at
 * once (the case is carried out: the select claims itself, withdraws the other
 * case and returns), an EMPTY cell gets the select's record, a cell its
 * counterpart gave up is passed for the next index. At the end of a pass it
 * opens (CAS REG -> OPEN), unless a counterpart bounced a case (REREG): then
 * it takes the claim word back to REG, withdraws each bounced case and
 * registers it again, and tries to open once more. Open, it waits until the
 * claim word leaves OPEN (TIMED: or moves it to TIMEDOUT itself), then
 * withdraws both cases: a case still in its cell is given up (GONE); one being
 * served (BUSY) is waited for.
 *
 * A counterpart (a plain sender, or a select registering) at a select's
 * record makes the cell BUSY, then claims: OPEN -> the case, and it moves the
 * value (DONE); REG or REREG -> sets the case's bounced flag, then CASes the
 * claim word to REREG, and leaves the cell GONE; anything else (another case,
 * TIMEDOUT) -> the cell GONE. Either way it goes on at its next index.
 *
 * Checked: no counterpart touches a select's record after the select returned;
 * an open select has every case in a cell; every value ends exactly once with
 * its sender or with one receiving select; a select that won got exactly its
 * case's value, one that timed out got none; no record is left in a cell; no
 * process is stuck (invalid end states). Runs where an index passes K (a
 * counterpart bouncing the same select round and round, which SPIN can spin
 * out forever) stop there and are not checked.
 * Mutations that must be caught (run_model.sh): -DNO_BOUNCE (a counterpart
 * claims a registering select), -DNO_REREGISTER (the select opens without
 * registering its bounced cases again), -DNO_BUSY_WAIT (withdrawal does not
 * wait for a server at work).
 */
#ifndef K
#define K 4
#endif
#ifndef NSEL
#define NSEL 2
#endif
#ifndef NPLAIN
#define NPLAIN 2
#endif
#define NV (NPLAIN + NSEL)
/* cell states */
#define EMPTY 0
#define BUSY 1
#define DONE 2
#define SGONE 3
#define RGONE 4
#define PLAIN 8      /* PLAIN + v: a plain sender's record with value v */
#define SELREC 32    /* SELREC + x: select x's record */
/* claim words */
#define OPEN 100
#define TIMEDOUT 101
#define REG 102
#define REREG 103
/* holders of values */
#define UNSET 0
#define KEPT 1
#define TO 10        /* TO + x: received by select x */

byte cell[2 * K];
byte S[2];
byte R[2];
byte claimed[NSEL];
bit bounced[2 * NSEL];
byte idx[2 * NSEL];       /* the cell a case is registered in */
bit registered[2 * NSEL];
bit sel_send[NSEL];       /* select x sends (else receives) */
bit timed[NSEL];
byte myval[NSEL];         /* a sending select's value; a receiving one's got */
bit sel_done[NSEL];
byte holder[NV + 1];
bit overflow = 0;
byte finished = 0;

/* A counterpart at cell ci holding select x's record `st`, for case c, with
 * value v to give (a sender) or 0 (a receiver; it takes the select's value).
 * won: 1 served, 0 passed over (the cell is GONE). */
inline serve_select(ci, st, x, c, v, won) {
  atomic {
    if
    :: cell[ci] == st -> cell[ci] = BUSY; ok = 1
    :: else -> ok = 0
    fi
  }
  if
  :: ok ->
     assert(!sel_done[x]);
#ifdef NO_BOUNCE
     atomic {
       if
       :: claimed[x] == OPEN || claimed[x] == REG || claimed[x] == REREG -> claimed[x] = c; won = 1
       :: else -> won = 0
       fi
     }
#else
     do
     :: atomic { claimed[x] == OPEN -> claimed[x] = c; won = 1 }; break
     :: atomic { claimed[x] == REG || claimed[x] == REREG -> skip };
        bounced[2 * x + c] = 1;
        atomic {
          if
          :: claimed[x] == REG || claimed[x] == REREG -> claimed[x] = REREG; won = 0; ok = 0
          :: else -> skip
          fi
        };
        if
        :: !ok -> break
        :: else -> skip
        fi
     :: atomic { claimed[x] != OPEN && claimed[x] != REG && claimed[x] != REREG -> won = 0 }; break
     od;
#endif
     assert(!sel_done[x]);
     if
     :: won ->
        if
        :: v != 0 -> assert(holder[v] == UNSET); holder[v] = TO + x; myval[x] = v
        :: else -> skip  /* the receiving side takes myval[x]: its caller */
        fi;
        cell[ci] = DONE
     :: else ->
        cell[ci] = (sel_send[x] -> SGONE : RGONE)
     fi
  :: else -> won = 0
  fi
}

proctype plain_sender(byte c; byte v; bit may_give_up) {
  byte s, ci, st, x;
  bit ok, won;
again:
  atomic { s = S[c]; S[c]++ };
  if
  :: s >= K -> overflow = 1; goto out
  :: else -> skip
  fi;
  ci = c * K + s;
look:
  st = cell[ci];
  if
  :: st >= SELREC ->
     x = st - SELREC;
     assert(!sel_send[x]);
     serve_select(ci, st, x, c, v, won);
     if
     :: won -> goto out
     :: else -> goto look
     fi
  :: st == EMPTY ->
     atomic {
       if
       :: cell[ci] == EMPTY -> cell[ci] = PLAIN + v; ok = 1
       :: else -> ok = 0
       fi
     };
     if
     :: !ok -> goto look
     :: else -> skip
     fi;
     /* wait in the cell: served (DONE), or give up */
     if
     :: cell[ci] == DONE -> skip
     :: overflow -> skip
     :: may_give_up ->
        atomic {
          if
          :: cell[ci] == PLAIN + v -> cell[ci] = SGONE; assert(holder[v] == UNSET); holder[v] = KEPT
          :: else -> skip
          fi
        };
        cell[ci] == DONE || cell[ci] == SGONE
     fi
  :: st == RGONE -> goto again
  fi;
out:
  finished++
}

/* Select x registers case c. carried: 1 if the case was carried out. */
inline enlist(x, c, carried) {
  carried = 0;
  next = 1;
  do
  :: next ->
     if
     :: sel_send[x] -> atomic { i = S[c]; S[c]++ }
     :: else -> atomic { i = R[c]; R[c]++ }
     fi;
     if
     :: i >= K -> overflow = 1; break
     :: else -> ci = c * K + i; next = 0
     fi
  :: !next ->
     st = cell[ci];
     if
     :: st == EMPTY ->
        atomic {
          if
          :: cell[ci] == EMPTY -> cell[ci] = SELREC + x; ok = 1
          :: else -> ok = 0
          fi
        };
        if
        :: ok -> idx[2 * x + c] = ci; registered[2 * x + c] = 1; break
        :: else -> skip
        fi
     :: st >= PLAIN && st < SELREC ->  /* a plain sender waits: take its value */
        assert(!sel_send[x]);
        atomic {
          if
          :: cell[ci] == st -> cell[ci] = BUSY; ok = 1
          :: else -> ok = 0
          fi
        };
        if
        :: ok ->
           assert(holder[st - PLAIN] == UNSET);
           holder[st - PLAIN] = TO + x; myval[x] = st - PLAIN;
           cell[ci] = DONE; carried = 1; break
        :: else -> skip
        fi
     :: st >= SELREC ->  /* another select waits on the other side */
        y = st - SELREC;
        assert(sel_send[y] != sel_send[x]);
        if
        :: sel_send[x] -> serve_select(ci, st, y, c, myval[x], won)
        :: else ->
           serve_select(ci, st, y, c, 0, won);
           if
           :: won -> assert(holder[myval[y]] == UNSET); holder[myval[y]] = TO + x; myval[x] = myval[y]
           :: else -> skip
           fi
        fi;
        if
        :: won -> carried = 1; break
        :: else -> skip
        fi
     :: st == SGONE || st == RGONE -> next = 1
     :: st == BUSY || st == DONE -> assert(0)  /* only this index's two parties come here */
     fi
  od
}

/* Takes case c of select x back; fin: the cell's final state. */
inline withdraw(x, c, fin) {
  fin = EMPTY;
  if
  :: registered[2 * x + c] ->
     ci = idx[2 * x + c];
#ifdef NO_BUSY_WAIT
     atomic {
#else
     atomic {
       cell[ci] != BUSY ->
#endif
       if
       :: cell[ci] == SELREC + x -> cell[ci] = (sel_send[x] -> SGONE : RGONE)
       :: else -> skip
       fi;
       fin = cell[ci]
     };
     registered[2 * x + c] = 0
  :: else -> skip
  fi
}

proctype selector(byte x) {
  byte i, ci, st, y, first, c, won_case, fin, fin_won;
  bit ok, won, carried, next;
  if
  :: first = 0
  :: first = 1
  fi;
  /* (macro arguments are substituted as text: pass plain variables) */
  c = first;
  enlist(x, c, carried);
  if
  :: overflow -> goto stop
  :: carried -> won_case = c; goto self
  :: else -> skip
  fi;
  c = 1 - first;
  enlist(x, c, carried);
  if
  :: overflow -> goto stop
  :: carried -> won_case = c; goto self
  :: else -> skip
  fi;
  do
  :: atomic {
#ifdef NO_REREGISTER
       claimed[x] == REG || claimed[x] == REREG ->
#else
       claimed[x] == REG ->
#endif
       claimed[x] = OPEN;
       /* open: every case waits in its cell, or is being served */
       assert(registered[2 * x] && registered[2 * x + 1]);
       assert(cell[idx[2 * x]] == SELREC + x || cell[idx[2 * x]] == BUSY);
       assert(cell[idx[2 * x + 1]] == SELREC + x || cell[idx[2 * x + 1]] == BUSY)
     };
     goto opened
  :: atomic { claimed[x] == REREG -> claimed[x] = REG };
     c = 0;
     do
     :: c == 2 -> break
     :: c < 2 ->
        if
        :: bounced[2 * x + c] ->
           bounced[2 * x + c] = 0;
           withdraw(x, c, fin);
           enlist(x, c, carried);
           if
           :: overflow -> goto stop
           :: carried -> won_case = c; goto self
           :: else -> skip
           fi
        :: else -> skip
        fi;
        c++
     od
  od;
self:
  /* Ours while registering. */
  atomic {
    assert(claimed[x] == REG || claimed[x] == REREG);
    claimed[x] = won_case
  };
  c = 1 - won_case;
  withdraw(x, c, fin);
  assert(fin != DONE);
  goto finish;
opened:
  do
  :: claimed[x] != OPEN -> break
  :: overflow -> goto stop
  :: timed[x] -> atomic { if :: claimed[x] == OPEN -> claimed[x] = TIMEDOUT :: else -> skip fi }
  od;
  c = 0;
  do
  :: c == 2 -> break
  :: c < 2 ->
     withdraw(x, c, fin);
     if
     :: claimed[x] == c -> fin_won = fin
     :: else -> assert(fin != DONE)
     fi;
     c++
  od;
  if
  :: claimed[x] == TIMEDOUT -> skip
  :: else -> assert(fin_won == DONE)
  fi;
finish:
  sel_done[x] = 1;
stop:
  finished++
}

init {
  byte x, v, n, c;
  atomic {
    x = 0;
    do
    :: x == NSEL -> break
    :: x < NSEL -> claimed[x] = REG; x++
    od;
#ifdef SEND_SELECT
    /* select 0 receives, select 1 sends (value NPLAIN + 2) */
    sel_send[1] = 1;
    myval[1] = NPLAIN + 2;
#endif
#ifdef TIMED
    timed[0] = 1;
#endif
    x = 0;
    do
    :: x == NSEL -> break
    :: x < NSEL -> run selector(x); x++
    od;
    v = 1;
    do
    :: v > NPLAIN -> break
    :: v <= NPLAIN ->
#ifdef GIVE_UP
       run plain_sender((v - 1) % 2, v, 1);
#else
       run plain_sender((v - 1) % 2, v, 0);
#endif
       v++
    od
  };
  finished == NSEL + NPLAIN || overflow;
  if
  :: overflow -> skip
  :: else ->
     /* every value ends with its sender or one receiving select */
     v = 1;
     do
     :: v > NV -> break
     :: v <= NV ->
        if
        :: v <= NPLAIN || (sel_send[v - NPLAIN - 1] && v == myval[v - NPLAIN - 1]) ->
           assert(holder[v] != UNSET || (v > NPLAIN && claimed[v - NPLAIN - 1] == TIMEDOUT))
        :: else -> skip
        fi;
        v++
     od;
     /* a receiving select that won got exactly one value, its own */
     x = 0;
     do
     :: x == NSEL -> break
     :: x < NSEL ->
        n = 0;
        v = 1;
        do
        :: v > NV -> break
        :: v <= NV -> if :: holder[v] == TO + x -> n++ :: else -> skip fi; v++
        od;
        if
        :: sel_send[x] -> assert(n == 0)
        :: !sel_send[x] && claimed[x] == TIMEDOUT -> assert(n == 0)
        :: !sel_send[x] && claimed[x] != TIMEDOUT -> assert(n == 1 && holder[myval[x]] == TO + x)
        fi;
        x++
     od;
     /* no record or server left in a cell */
     c = 0;
     do
     :: c == 2 * K -> break
     :: c < 2 * K -> assert(cell[c] < PLAIN && cell[c] != BUSY); c++
     od
  fi
}
