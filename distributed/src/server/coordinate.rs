//! The scheduler's side of `Variable`, `Queue`, `Lock`, `Event`,
//! `Semaphore` and published datasets: one [`Board`] for the cluster, each
//! request answered to the connection that made it, when it can be. Tasks
//! reach it through their worker's own client connection, so a worker that
//! dies frees the locks and leases its tasks held (as a client that leaves
//! does), and nobody waits for them forever.

use brisk_engine::coordination::{Answers, Board, CoordOp, Ticket};
use rustc_hash::{FxHashMap, FxHashSet};

use super::{ConnId, State};
use crate::protocol::ToClient;

/// The board and who asked what.
#[derive(Default)]
pub(super) struct Coordination {
    board: Board,
    next: Ticket,
    /// Each unanswered request's connection and its id there.
    asked: FxHashMap<Ticket, (ConnId, u64)>,
    tickets: FxHashMap<(ConnId, u64), Ticket>,
    /// The holders (of locks, leases) each connection named.
    holders: FxHashMap<ConnId, FxHashSet<u64>>,
}

impl State {
    pub(super) fn coordinate(&mut self, conn: ConnId, id: u64, op: CoordOp, wait: bool) {
        let c = &mut self.coordination;
        if let Some(h) = op.holder() {
            c.holders.entry(conn).or_default().insert(h);
        }
        if let CoordOp::DropHolders { holders } = &op
            && let Some(mine) = c.holders.get_mut(&conn)
        {
            holders.iter().for_each(|h| {
                mine.remove(h);
            });
        }
        c.next += 1;
        let ticket = c.next;
        c.asked.insert(ticket, (conn, id));
        c.tickets.insert((conn, id), ticket);
        let answers = c.board.request(ticket, op, wait);
        self.answer(answers);
    }

    /// The request's time is up at its client: answered `TimedOut` now,
    /// unless its answer is on its way.
    pub(super) fn withdraw(&mut self, conn: ConnId, id: u64) {
        let c = &mut self.coordination;
        let Some(ticket) = c.tickets.get(&(conn, id)).copied() else { return };
        if let Some(reply) = c.board.withdraw(ticket) {
            c.asked.remove(&ticket);
            c.tickets.remove(&(conn, id));
            self.tell_client(conn, ToClient::Coordinated { id, reply });
        }
    }

    /// `conn` left: its waiting requests go, and what its holders held is
    /// free for the others.
    pub(super) fn coordination_gone(&mut self, conn: ConnId) {
        let c = &mut self.coordination;
        let mine: Vec<(u64, Ticket)> =
            c.tickets.iter().filter(|((k, _), _)| *k == conn).map(|((_, id), t)| (*id, *t)).collect();
        for (id, ticket) in mine {
            c.board.withdraw(ticket);
            c.asked.remove(&ticket);
            c.tickets.remove(&(conn, id));
        }
        let Some(holders) = c.holders.remove(&conn) else { return };
        let answers = c.board.drop_holders(&holders);
        self.answer(answers);
    }

    fn answer(&mut self, answers: Answers) {
        for (ticket, reply) in answers {
            let Some((conn, id)) = self.coordination.asked.remove(&ticket) else { continue };
            self.coordination.tickets.remove(&(conn, id));
            self.tell_client(conn, ToClient::Coordinated { id, reply });
        }
    }
}
