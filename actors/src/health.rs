//! Liveness of the long-lived actors: a `Ping` each one answers from its own mailbox, so a
//! stopped or wedged actor is told from a working one (what `componentstatuses` reports).

use std::time::Duration;

use actix::{Message, Recipient};

/// Answered, with nothing, by an actor that is running and reading its mailbox.
pub struct Ping;

impl Message for Ping {
    type Result = ();
}

/// Makes each listed actor type answer [`Ping`].
macro_rules! answers_ping {
    ($($actor:ty),+ $(,)?) => {
        $(
            impl actix::Handler<$crate::health::Ping> for $actor {
                type Result = ();

                fn handle(
                    &mut self,
                    _: $crate::health::Ping,
                    _: &mut <Self as actix::Actor>::Context,
                ) {
                }
            }
        )+
    };
}
pub(crate) use answers_ping;

/// Whether the actor behind `recipient` answers a [`Ping`] within `timeout`; `Err` says why not.
pub async fn ping(recipient: &Recipient<Ping>, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, recipient.send(Ping)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err("it has stopped".to_string()),
        Err(_) => Err(format!("it did not answer within {timeout:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix::{Actor, ActorContext, Context, Handler};

    struct Sleeper;

    impl Actor for Sleeper {
        type Context = Context<Self>;
    }

    answers_ping!(Sleeper);

    /// Blocks its thread: a wedged actor.
    struct Block(Duration);

    impl Message for Block {
        type Result = ();
    }

    impl Handler<Block> for Sleeper {
        type Result = ();

        fn handle(&mut self, Block(how_long): Block, _: &mut Context<Self>) {
            std::thread::sleep(how_long);
        }
    }

    struct Stop;

    impl Message for Stop {
        type Result = ();
    }

    impl Handler<Stop> for Sleeper {
        type Result = ();

        fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
            ctx.stop();
        }
    }

    #[actix::test]
    async fn a_running_actor_answers_a_stopped_or_wedged_one_does_not() {
        let timeout = Duration::from_millis(200);
        let running = Sleeper.start();
        assert_eq!(ping(&running.clone().recipient(), timeout).await, Ok(()));

        let wedged = Sleeper::start_in_arbiter(&actix::Arbiter::new().handle(), |_| Sleeper);
        wedged.do_send(Block(Duration::from_secs(2)));
        let answer = ping(&wedged.recipient(), timeout).await;
        assert_eq!(answer, Err("it did not answer within 200ms".to_string()));

        running.send(Stop).await.unwrap();
        let answer = ping(&running.recipient(), timeout).await;
        assert_eq!(answer, Err("it has stopped".to_string()));
    }
}
