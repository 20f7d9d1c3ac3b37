"""hcq.drivers.mock: emulated kernel interfaces and the GPUs behind them (MOCKKFD+AMD)."""
