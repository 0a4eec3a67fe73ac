/*
 * paygw's apply protocol for one order and one payment (apply.Apply, guard.CheckAndAcquire and
 * MarkDoneAndRelease, identity.Watcher), checked exhaustively by spin. See README.md here.
 *
 * Variants (-D):
 *   MARK_BEFORE_COMMIT  broken: the done marker is set before COMMIT
 *   NO_EPOCH            broken: a detected rollback does not move the epoch on
 *   MARK_NS_AT_WRITE    MarkDoneAndRelease writes the markers under the namespace bound when it
 *                       runs (what guard.go did before it took Apply's), not the one the request started under
 *   GROUP_FAIL_SUCCESS  broken: a payment of a failed group is answered success instead of going alone
 *   LIVE                adds the liveness claim p5 (run with pan -a -f)
 * Properties can be checked one at a time: ONLY_P1 .. ONLY_P4 (default: all four).
 * Fault budgets: MAXRB rollbacks, MAXCRASH replica crashes, MAXOUT Redis outages, MAXTXF
 * failed or ambiguous commits, MAXGF groups failed by their other item, MAXSHARE payments of a
 * second order C under A's transaction id, MAXDL callers leaving a running group on their
 * deadline. Lock expiry and Redis flushes are unbounded.
 */

#ifndef MAXRB
#define MAXRB 1
#endif
#ifndef MAXCRASH
#define MAXCRASH 2
#endif
#ifndef MAXOUT
#define MAXOUT 1
#endif
#ifndef MAXTXF
#define MAXTXF 1
#endif

#ifndef MAXGF
#define MAXGF 1
#endif
#ifndef MAXSHARE
#define MAXSHARE 1
#endif
#ifndef MAXDL
#define MAXDL 1
#endif

#define NEP (MAXRB + 1)   /* epochs 0..MAXRB: the epoch moves on once per detected rollback */

#if defined(ONLY_P1) || defined(ONLY_P2) || defined(ONLY_P3) || defined(ONLY_P4)
#define SOME 1
#endif
#if !defined(SOME) || defined(ONLY_P1)
#define CHECK_P1 1
#endif
#if !defined(SOME) || defined(ONLY_P2)
#define CHECK_P2 1
#endif
#if !defined(SOME) || defined(ONLY_P3)
#define CHECK_P3 1
#endif
#if !defined(SOME) || defined(ONLY_P4)
#define CHECK_P4 1
#endif

/* ---- MySQL: the order row and the payment's idempotent_record ---- */
bit  paid;        /* orders.status = PAID (else WAIT_PAY) */
bit  rec;         /* the record is committed (uk_idem_key) */
byte paidtx;      /* WAIT_PAY -> PAID transitions the database holds */
byte rowlock;     /* replica+1 whose open transaction holds the order's row lock; 0 none */
byte dbep;        /* the epoch db_identity states */
bit  lost;        /* the database went back in time and no watcher has seen it yet */
byte rbs;         /* rollbacks so far */
byte txf;         /* failed or ambiguous commits so far */

/* ---- group apply: the other order of a group, B, and its payment ---- */
bit  paidB;       /* B's order is PAID */
bit  recB;        /* B's payment record is committed */
byte paidtxB;     /* WAIT_PAY -> PAID transitions of B */
byte gfail;       /* groups failed by B's item so far */
byte gpend;       /* replica+1 whose process runs a group its caller left (batch.Do returned on
                   * the caller's deadline); the group holds A's row lock until it ends; 0 none */
byte dls;         /* callers that left a running group so far */

/* ---- a second order C paid under A's channel transaction id (a channel's bug, which the code
 * meets: TestGroupApplyFailedGroupGoesAlone). Its record has A's record key, so when C's payment
 * holds it, A's insert is a duplicate key while A's order is still WAIT_PAY. ---- */
bit  recC;        /* the committed record is C's payment's, not A's */
byte shares;      /* C's payments applied so far */

/* ---- Redis: one done marker and one trade guard per namespace (epoch) ---- */
bit  up = 1;
bit  marker[NEP];
byte lock[NEP];   /* replica+1 holding the guard of that namespace; 0 free */
byte outages;

/* ---- replicas and the channel ---- */
byte ns[2];       /* the namespace each replica's guard is bound to */
byte cache[2];    /* in-process done cache: bit e set = the marker is cached under epoch e */
bit  req[2];      /* replica is handling a delivery */
bit  crash[2];
byte crashes;
bit  got;         /* the channel has had a success reply */

/* A view of the database is stale when a rollback is not yet seen, or the epoch the view is
 * read under is older than the database's (the replica has not bound the new one yet). */
#define STALE(e) (lost || (e) != dbep)

/* Asserted at the moment a success reply is decided, with e the namespace the answer was read
 * under (the database paths read rec itself, in the same step).
 * P2: the record is committed, or a rollback not yet seen under e has taken it away.
 * P4: once the rollback is seen under e, success only for a payment the database holds. */
inline success(e) {
	skip
#ifdef CHECK_P2
	; assert(rec || (rbs > 0 && STALE(e)))
#endif
#ifdef CHECK_P4
	; assert(rbs == 0 || STALE(e) || rec)
#endif
}

/* COMMIT: the conditional UPDATE's change (if it matched) and the record become durable. */
inline commit() {
	if
	:: upd -> paid = 1; paidtx++
	:: else
	fi;
	rec = 1; rowlock = 0; upd = 0
#ifdef CHECK_P1
	; assert(paidtx <= 1)
#endif
}

/* B's payment applied: by its group's COMMIT when B was WAIT_PAY at the group's lock, or alone
 * (the single path, checked above for A) after a group it left or that failed. Either way the
 * conditional update moves B once. */
inline applyB() {
	if
	:: !paidB -> paidB = 1; recB = 1; paidtxB++
	:: else
	fi
#ifdef CHECK_P1
	; assert(paidtxB <= 1)
#endif
}

/* the deferred lock.Release: compare-and-delete, skipped while Redis is down (the TTL ends it) */
inline release() {
	if
	:: up && haslock && lock[lep] == me + 1 -> lock[lep] = 0
	:: else
	fi;
	haslock = 0
}

#ifdef MARK_NS_AT_WRITE
#define MARKNS ns[me]
#else
#define MARKNS start
#endif

proctype Replica(byte me) {
	byte start;   /* a.guard.Namespace() when Apply began */
	byte lep;     /* the namespace the guard was taken under */
	bit haslock, upd;

	do
	:: {
		req[me];
		start = ns[me];
		/* in-process cache, under the namespace read at the start */
		atomic {
			if
			:: cache[me] & (1 << start) -> success(start); goto replyok
			:: else
			fi
		}
fast:		/* checkAndLock: one Lua script */
		atomic {
			if
			:: !up -> goto nofast
			:: up && marker[ns[me]] -> success(ns[me]); cache[me] = cache[me] | (1 << start); goto replyok
			:: up && !marker[ns[me]] && lock[ns[me]] == 0 -> lock[ns[me]] = me + 1; lep = ns[me]; haslock = 1; goto tx
			:: up && !marker[ns[me]] && lock[ns[me]] != 0 -> goto held
			fi
		}
held:		/* a twin holds the guard: poll again within TwinWait, or answer retry */
		if
		:: goto fast
		:: goto replyretry
		fi;
nofast:		/* Redis down: one SELECT tells a repeat; else on without a lock */
		atomic {
			if
			:: rec -> success(start); cache[me] = cache[me] | (1 << start); goto replyok
			:: else -> goto tx
			fi
		}
tx:		/* alone, or in a group with B's payment (group apply, apply/group.go) */
		if
		:: goto alone
		:: goto group
		fi;
group:		/* the group's SELECT ... FOR UPDATE: A is in the group only if its order is WAIT_PAY */
		atomic {
			rowlock == 0 -> rowlock = me + 1;
			if
			:: paid -> rowlock = 0; applyB(); goto alone  /* A left the fast path: B's group commits without it */
			:: else
			fi;
			upd = 1;
			if
			:: rec -> rowlock = 0; upd = 0; applyB(); goto alone  /* A's record insert: duplicate key, the group fails */
			:: else
			fi
		}
		/* batch.Do returns on the caller's deadline while its group runs on in this process: the
		 * caller answers retry and releases its guard; the group commits or fails later
		 * (LeftGroup), and no marker is written for it */
		if
		:: atomic { dls < MAXDL -> dls++; gpend = me + 1; upd = 0 }; goto fail
		:: skip
		fi;
		/* B's item is the one that fails: its record insert fails the group, rolled back whole */
		if
		:: atomic { gfail < MAXGF -> gfail++; rowlock = 0; upd = 0; applyB() }; goto groupfail
		:: skip
		fi;
		if
		:: atomic { commit(); applyB(); success(start) }; goto post
		:: atomic { txf < MAXTXF -> txf++; commit(); applyB() }; goto groupfail  /* ambiguous COMMIT */
		:: atomic { txf < MAXTXF -> txf++; rowlock = 0; upd = 0; applyB() }; goto groupfail  /* failed */
		fi;
groupfail:	/* every payment of a failed group goes alone; the unique key tells what the group did */
#ifdef GROUP_FAIL_SUCCESS
		atomic { success(start) }; goto post
#endif
		goto alone;
alone:		/* one transaction: conditional UPDATE (row lock), then the record insert */
		atomic {
			rowlock == 0 -> rowlock = me + 1;
			upd = !paid;  /* no match: LockOrder + classify says REPEAT, the insert decides */
			if
			:: rec -> rowlock = 0; upd = 0; goto dup  /* duplicate key: rolled back */
			:: else
			fi
		}
#ifdef MARK_BEFORE_COMMIT
		atomic { if :: up -> marker[ns[me]] = 1 :: else fi }
#endif
		if
		:: atomic { commit(); success(start) }; goto post
		:: atomic { txf < MAXTXF -> txf++; commit() }; goto fail        /* ambiguous COMMIT */
		:: atomic { txf < MAXTXF -> txf++; rowlock = 0; upd = 0 }; goto fail  /* failed */
		fi;
dup:		/* GetRecord afresh: a twin committed first */
		atomic {
			if
			:: rec -> success(start); goto post
			:: else -> goto fail
			fi
		}
post:		/* MarkDoneAndRelease: markers first, then the lock, one pipeline */
		atomic {
			if
			:: up -> marker[MARKNS] = 1
			:: else
			fi;
			release()
		}
		cache[me] = cache[me] | (1 << start);
replyok:
		got = 1;
		goto done;
fail:
		atomic { release() }
replyretry:
		skip;
done:
		atomic { req[me] = 0; start = 0; lep = 0; haslock = 0; upd = 0 }
	} unless {
		crash[me] ->
		atomic {  /* the process dies: its transaction is rolled back, its guard stays */
			crash[me] = 0;
			if
			:: rowlock == me + 1 -> rowlock = 0
			:: else
			fi;
			if
			:: gpend == me + 1 -> gpend = 0  /* the group its caller left dies with the process */
			:: else
			fi;
			cache[me] = 0; ns[me] = dbep;  /* a new process reads the identity at start */
			req[me] = 0; start = 0; lep = 0; haslock = 0; upd = 0
		}
	}
	od
}

/* The channel delivers to either replica, concurrently or one after the other, and goes on until
 * it has a success (weak fairness makes it); it may send duplicates after a success too. */
active proctype Channel() {
	do
	:: atomic { !req[0] -> req[0] = 1 }
	:: atomic { !req[1] -> req[1] = 1 }
	od
}

/* The database goes back in time (a restore, a failover to a replica that missed commits): the
 * last committed payment is lost, Redis keeps its markers. A busy replica crashes. C's payment,
 * under A's transaction id, commits the record (C's own order row is not A's: only A's open
 * transaction, whose insert would hold the key, keeps it out). */
active proctype Faults() {
	do
	:: atomic { rec && rbs < MAXRB && rowlock == 0 -> rec = 0; lost = 1; rbs++;
		if
		:: recC -> recC = 0
		:: else -> paid = 0; paidtx--
		fi }
	:: atomic { shares < MAXSHARE && !rec && rowlock == 0 -> shares++; rec = 1; recC = 1 }
	:: atomic { crashes < MAXCRASH && req[0] -> crash[0] = 1; crashes++ }
	:: atomic { crashes < MAXCRASH && req[1] -> crash[1] = 1; crashes++ }
	od
}

/* A group whose caller left runs on: it commits (A's payment durable, nobody told so, no marker
 * written) or fails (nothing of A). It held A's row lock since it found the order WAIT_PAY. */
active proctype LeftGroup() {
	do
	:: atomic { gpend != 0 -> paid = 1; paidtx++; rec = 1; rowlock = 0; gpend = 0; applyB()
#ifdef CHECK_P1
		; assert(paidtx <= 1)
#endif
	}
	:: atomic { gpend != 0 -> rowlock = 0; gpend = 0; applyB() }
	od
}

/* Redis: outages (a restart may come back empty) and guard expiry (its holder slow or dead). */
active proctype Redis() {
	byte e;
	do
	:: atomic { up && outages < MAXOUT -> up = 0; outages++ }
	:: atomic { !up -> up = 1 }
	:: atomic { !up -> up = 1; for (e : 0 .. MAXRB) { marker[e] = 0; lock[e] = 0 }; e = 0 }
	:: atomic { lock[0] != 0 -> lock[0] = 0 }
#if MAXRB >= 1
	:: atomic { lock[1] != 0 -> lock[1] = 0 }
#endif
#if MAXRB >= 2
	:: atomic { lock[2] != 0 -> lock[2] = 0 }
#endif
	od
}

/* identity.Watcher: sees the rollback and starts a new epoch in the database; each replica
 * binds it and drops its cache (ForgetMarkers). */
active proctype Watcher() {
	do
	:: atomic { lost ->
#ifndef NO_EPOCH
		dbep++;
#endif
		lost = 0 }
	:: atomic { ns[0] != dbep -> ns[0] = dbep; cache[0] = 0 }
	:: atomic { ns[1] != dbep -> ns[1] = dbep; cache[1] = 0 }
	od
}

#ifdef CHECK_P3
/* P3: once the rollback is seen, a marker of the database's epoch stands for a committed record. */
active proctype P3() {
	atomic { !(lost || !marker[dbep] || rec) -> assert(lost || !marker[dbep] || rec) }
}
#endif

init {
	atomic { run Replica(0); run Replica(1) }
}

#ifdef LIVE
/* P5: with faults bounded (the database and Redis come back) and the channel redelivering, a
 * success reply comes (weak fairness: pan -a -f). */
ltl p5 { <> got }
#endif
