/* SPIN model of Tessera's waiting chain (Dice & Kogan, "Semaphores Augmented with a Waiting Array", Listing 3) as implemented in
 * include/tessera/wait_chain.h (chain_wait) and sync/wait_chain.cpp (withdraw, poke).
 *
 * Processes: NW waiters on one chain, each waiting for its own condition (so
 * they are "colliding keys"), some of which may time out at any moment, and one
 * signaller per waiter that sets the condition and signals (exchange or polite
 * form). Stack reuse is modelled: a waiter's next element has the same owner
 * with a new epoch, so a stale poke of an earlier element is caught.
 *
 * Checked (sequentially consistent interleavings, which is what the seq_cst
 * exchange/CAS/loads of the implementation provide):
 *  - a poke only ever hits an element that is still current and not yet poked
 *    (no double or stale poke => an element never leaves scope while reachable);
 *  - no lost wake-up: every waiter terminates (SPIN's invalid-end-state check);
 *  - at the end the chain is empty (no element stranded).
 * Mutations (run_model.sh): NO_PROPAGATE (a woken waiter does not poke its
 * predecessor), NO_FLUSH_PREFIX (a withdrawing waiter detaches the elements
 * pushed after it and does not wake them).
 */
#ifndef NW
#define NW 3
#endif
#define K 8                 /* epochs per waiter: element id = owner*K + epoch */

byte head = 0;              /* chain head: element id, 0 = empty */
bit gate[NW + 1];
byte epoch[NW + 1];
bit cond[NW + 1];
byte finished = 0;

inline poke(e) {
  if
  :: e != 0 ->
     atomic {
       assert(e % K == epoch[e / K]);   /* not a stale element */
       assert(gate[e / K] == 0);        /* not poked twice */
       gate[e / K] = 1
     }
  :: else -> skip
  fi
}

proctype Waiter(byte i; bit may_time_out) {
  byte me, p, seen, prefix;
  do
  :: cond[i] -> goto fin                        /* satisfied() before pushing */
  :: else ->
     epoch[i]++;
     assert(epoch[i] < K);
     me = i * K + epoch[i];
     gate[i] = 0;
     atomic { p = head; head = me };            /* exchange: push */
     if
     :: cond[i] -> goto withdraw                 /* ratify: mis-queued */
     :: else ->
        if
#ifdef NO_PROPAGATE
        :: gate[i] == 1 -> skip                  /* mutation: the poke is not passed on */
#else
        :: gate[i] == 1 -> poke(p)               /* woken: propagate, re-check */
#endif
        :: may_time_out -> goto withdraw         /* deadline passed while parked */
        fi
     fi
  od;
withdraw:
  atomic {                                       /* CAS(head: me -> p) */
    if
    :: head == me -> head = p; seen = 255
    :: else -> seen = head
    fi
  };
  if
  :: seen == 255 -> skip                         /* undone: p stays on the chain */
  :: else ->
     if
     :: (seen != 0 && gate[i] == 0) ->           /* flush */
        atomic { prefix = head; head = 0 };
        poke(p);
#ifndef NO_FLUSH_PREFIX
        poke(prefix)
#else
        skip                                     /* mutation: those pushed after us are dropped */
#endif
     :: else -> poke(p)                          /* already detached by a signaller */
     fi;
     gate[i] == 1                                /* await_gate: until unreachable */
  fi;
fin:
  finished++
}

proctype Signaller(byte i; bit polite) {
  byte e;
  cond[i] = 1;
  if
  :: polite && head == 0 -> skip                 /* polite: nobody waits */
  :: else ->
     atomic { e = head; head = 0 };              /* detach all */
     poke(e)
  fi
}

init {
  byte i;
  atomic {
    i = 1;
    do
    :: i <= NW ->
       run Waiter(i, i % 2 == 0);                 /* even waiters may time out */
       run Signaller(i, i % 2);                   /* odd signallers are polite */
       i++
    :: else -> break
    od
  };
  finished == NW;
  assert(head == 0)                              /* nothing stranded on the chain */
}
