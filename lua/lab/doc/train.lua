-- Docstrings of lab.train, the training loop (help(lab.train.run)): lua/lab/train.lua.
return {
  run = "lab.train.run({model=, batch=, steps=, lr=, min_lr=, warmup=, clip=, weight_decay=, log_every=, metrics=, quiet=, on_step=}) -> {loss=, tokens_per_s=, time=}: AdamW with warm-up and cosine decay",
  progress_line = "lab.train.progress_line(step, steps, loss, lr, tokens_per_s, elapsed) -> string: a progress line with ETA",
  fmt_time = "lab.train.fmt_time(s) -> string: seconds as '2m05s' or '1h03m'",
}
