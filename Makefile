# kplane: `make run` starts the server, `make test` runs every test and compiles the benches.
# Both install what a fresh machine lacks first (see scripts/setup.sh).

.PHONY: setup run test bench

# Named one by one: a bare `cargo bench` would also build the libraries' unit tests as benches.
BENCHES = --bench mailbox --bench api_load --bench scheduler --bench agent

setup:
	@bash scripts/setup.sh

run: setup
	cargo run --release -- server --config config/kplane.toml

test:
	@bash scripts/setup.sh test
	cargo test --workspace --no-fail-fast --lib --bins --tests
	cargo bench --no-run $(BENCHES)

bench: setup
	cargo bench $(BENCHES)
