/* SPIN model of select()'s claim (sync/select.cpp, include/tessera/select.h,
 * include/tessera/detail/select_node.h) over two channels of capacity 1.
 *
 * The select locks both channels (in order), takes a buffered value if there
 * is one (either, nondeterministically: the random poll order), else links a
 * node on each channel's receiver list, lets go of the locks and parks until
 * its claim word leaves OPEN. With TIMEOUT it may instead CAS OPEN -> TIMEDOUT
 * whenever it is parked. Once woken it locks both channels again, takes back
 * the node that was not served, and reads what the winner delivered.
 *
 * Senders (S per channel, each sending one distinct value) lock their channel;
 * a linked node not yet served is claimed (CAS OPEN -> the channel) before the
 * value is moved into the select's slot; a node whose claim fails is unlinked
 * and passed over. With no node to serve, the value is buffered, or (buffer
 * full) the send fails and the sender keeps it.
 *
 * Checked at the end: at most one value reaches the select, and it is the
 * claimed case's; a timed-out select got nothing; every value is exactly once
 * in the select, a buffer or its sender's hands; no node is left linked; no
 * process is stuck (invalid end states).
 * Mutations that must be caught (run_model.sh): -DNO_CLAIM (a sender serves
 * the node without claiming the select), -DNO_RELOCK (the select reads its
 * result without locking the channels again: the winner may not have
 * delivered yet).
 */
#ifndef S
#define S 1
#endif
#define OPEN 255
#define TIMEDOUT 254
#define NOBODY 255

byte claimed = OPEN;
bit lk[2];
bit linked[2];   /* the select's node on channel c's receiver list */
bit served[2];   /* its node was served (marked) */
byte slot[2];    /* the value delivered into the select's case c */
byte buf[2];     /* channel c's buffer (capacity 1): 0 empty */
byte outcome[2 * S];  /* per value: 1 to the select, 2 buffered, 3 kept (send failed) */
byte got = 0;
byte got_from = NOBODY;
bit pm = 0;      /* the select's park permit */
byte finished = 0;

inline lock(c) { atomic { lk[c] == 0 -> lk[c] = 1 } }
inline unlock(c) { lk[c] = 0 }

proctype sender(byte c; byte v) {
  bit ok = 0;
  lock(c);
  if
  :: linked[c] && !served[c] ->
#ifdef NO_CLAIM
     ok = 1;
     atomic { if :: claimed == OPEN -> claimed = c :: else -> skip fi }
#else
     atomic {
       if
       :: claimed == OPEN -> claimed = c; ok = 1
       :: else -> ok = 0
       fi
     }
#endif
     if
     :: ok ->
        slot[c] = v; served[c] = 1; linked[c] = 0; outcome[v - 1] = 1;
        unlock(c);
        pm = 1   /* unpark */
     :: else ->
        linked[c] = 0;  /* a stale node: passed over */
        if
        :: buf[c] == 0 -> buf[c] = v; outcome[v - 1] = 2
        :: else -> outcome[v - 1] = 3
        fi;
        unlock(c)
     fi
  :: else ->
     if
     :: buf[c] == 0 -> buf[c] = v; outcome[v - 1] = 2
     :: else -> outcome[v - 1] = 3
     fi;
     unlock(c)
  fi;
  atomic { finished++ }
}

proctype selector() {
  lock(0); lock(1);
  if
  :: buf[0] != 0 -> got = buf[0]; buf[0] = 0; got_from = 0; unlock(1); unlock(0); goto out
  :: buf[1] != 0 -> got = buf[1]; buf[1] = 0; got_from = 1; unlock(1); unlock(0); goto out
  :: buf[0] == 0 && buf[1] == 0 -> skip
  fi;
  linked[0] = 1; linked[1] = 1;
  unlock(1); unlock(0);
  do
  :: claimed != OPEN -> break
  :: claimed == OPEN && pm -> pm = 0   /* a wake-up: look again */
#ifdef TIMEOUT
  :: atomic { claimed == OPEN -> claimed = TIMEDOUT }
#endif
  od;
#ifndef NO_RELOCK
  lock(0); lock(1);
#endif
  if :: linked[0] && !served[0] -> linked[0] = 0 :: else -> skip fi;
  if :: linked[1] && !served[1] -> linked[1] = 0 :: else -> skip fi;
  if
  :: claimed != TIMEDOUT ->
     assert(served[claimed]);
     got = slot[claimed]; got_from = claimed
  :: else -> skip
  fi;
#ifndef NO_RELOCK
  unlock(1); unlock(0);
#endif
out:
  atomic { finished++ }
}

init {
  byte k = 0;
  atomic {
    run selector();
    do
    :: k < 2 * S -> run sender(k % 2, k + 1); k++
    :: else -> break
    od
  }
  finished == 2 * S + 1;
  /* At most one value reached the select, and it is its case's. */
  byte to_select = 0;
  k = 0;
  do
  :: k < 2 * S ->
     assert(outcome[k] >= 1 && outcome[k] <= 3);
     if
     :: outcome[k] == 1 ->
        to_select++;
        assert(got == k + 1 && got_from == k % 2 && claimed == k % 2)
     :: outcome[k] == 2 ->
        /* buffered: still there, or the select's poll took it */
        assert(buf[k % 2] == k + 1 || (got == k + 1 && claimed == OPEN))
     :: else -> skip
     fi;
     k++
  :: else -> break
  od;
  assert(to_select <= 1);
  if :: claimed == TIMEDOUT -> assert(got == 0) :: else -> skip fi;
  if :: got != 0 -> skip :: else -> assert(claimed == TIMEDOUT) fi;
  assert(!linked[0] && !linked[1])
}
