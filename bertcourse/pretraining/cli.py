"""The command line of :mod:`bertcourse.pretrain`: train (the default), ``fill-mask`` and
``evaluate``. ``python -m bertcourse.pretrain --help`` shows all three in its usage line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bertcourse import pretrain
from bertcourse.distributed import teardown_distributed
from bertcourse.fillmask import fill_mask, format_probability
from bertcourse.languages import language_codes
from bertcourse.mlm import MaskSplit
from bertcourse.nsp import TASKS
from bertcourse.pretrain import MODEL_SIZES, PretrainConfig, run
from bertcourse.pretraining.checkpoint import load_checkpoint
from bertcourse.pretraining.config import WORD_SOURCES
from bertcourse.pretraining.evaluation import evaluate_checkpoint

PROG = "python -m bertcourse.pretrain"
USAGE = f"""{PROG} [train] [--model SIZE] [--steps N | --max-minutes M] [--output DIR] [options]
       {PROG} fill-mask --checkpoint DIR [--top-k K] TEXT [TEXT ...]
       {PROG} evaluate DIR [DIR ...] [--transformers] [--json FILE]
       ({PROG} fill-mask --help, ... evaluate --help: their options)"""


def _train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        usage=USAGE,
        description=pretrain.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = PretrainConfig()
    g = p.add_argument_group("model")
    g.add_argument("--model", choices=MODEL_SIZES, help=f"size preset (default {d.model})")
    g.add_argument("--layers", type=int, help="number of layers (overrides the preset)")
    g.add_argument("--hidden", type=int, help="hidden size")
    g.add_argument("--heads", type=int, help="attention heads")
    g.add_argument("--intermediate", type=int, help="feed-forward size")
    g.add_argument("--dropout", type=float, help=f"dropout (default {d.dropout}; BERT: 0.1)")
    g = p.add_argument_group("data")
    g.add_argument(
        "--lang",
        help=f"language of the corpus and the vocabularies: {', '.join(language_codes())} "
        f"(default {d.lang}; bertcourse.languages)",
    )
    g.add_argument(
        "--tokenizer",
        help="'wordpiece-8192' (default: trained on the corpus, best for small models), any "
        "'wordpiece-N', or 'bert' (the bert-base-uncased vocabulary)",
    )
    g.add_argument("--text-files", nargs="+", help="your own .txt files or folders")
    g.add_argument("--documents", choices=["file", "block"], help="document unit of --text-files")
    g.add_argument("--max-seq-length", type=int, help=f"default {d.max_seq_length}")
    g.add_argument(
        "--packing",
        action="store_true",
        default=None,
        help="pack several pairs per row (no padding); --batch-size then counts rows",
    )
    g.add_argument(
        "--mask-rate",
        "--mlm-probability",
        dest="mlm_probability",
        type=float,
        metavar="RATE",
        help=f"share of tokens chosen for prediction in training, in (0, 1) (default "
        f"{d.mlm_probability}; BERT: 0.15)",
    )
    g.add_argument(
        "--mask-split",
        type=_mask_split,
        metavar="M,S,R",
        help=f"MASK,SAME,RND: what a chosen token shows, shares summing to 1 (default "
        f"{d.mask_split}, BERT's)",
    )
    g.add_argument(
        "--sentence-task",
        choices=TASKS,
        help="nsp (BERT's next-sentence prediction, the default), sop (ALBERT's sentence "
        "order) or none (no sentence loss)",
    )
    g.add_argument(
        "--static-masking",
        type=int,
        metavar="N",
        help="the original release's static data: pairs cut and masked once, in N copies read "
        "in turn (default: dynamic, new pairs and masks every epoch)",
    )
    g.add_argument(
        "--whole-word-masking",
        dest="word_source",
        nargs="?",
        const="gold",
        choices=WORD_SOURCES,
        help="choose whole words to mask, not single tokens; the words: gold (the default: the "
        "corpus's, for Chinese its gold segmentation) or jieba (Chinese)",
    )
    g.add_argument(
        "--eval-seq-length",
        type=int,
        help=f"length of the held-out pairs, the same for every run (default {d.eval_seq_length})",
    )
    g.add_argument("--eval-examples", type=int, help="cap on held-out pairs")
    g = p.add_argument_group("optimisation")
    g.add_argument(
        "--steps",
        type=int,
        help=f"optimizer steps (default {d.steps}, --lang zh: 9000; with --max-minutes and no "
        "--steps, the schedule runs on the time instead)",
    )
    g.add_argument("--batch-size", type=int, help=f"global batch (default {d.batch_size})")
    g.add_argument("--lr", type=float, help=f"peak learning rate (default {d.lr})")
    g.add_argument("--warmup-steps", type=int, help="default: 10%% of --steps")
    g.add_argument("--schedule", choices=["linear", "polynomial"], help="default linear")
    g.add_argument("--weight-decay", type=float, help=f"default {d.weight_decay}")
    g.add_argument("--seed", type=int, help=f"default {d.seed}")
    a = p.add_argument_group("running").add_argument
    a("--output", dest="output_dir", help=f"output folder (default {d.output_dir})")
    a("--resume", help="continue from this output/checkpoint folder (its settings are reused)")
    a("--eval-every", type=int, help=f"held-out evaluation every N steps (default {d.eval_every})")
    a("--checkpoint-every", type=int, help=f"default {d.checkpoint_every}")
    a("--log-every", type=int, help=f"default {d.log_every}")
    a("--stop-after", type=int, help="stop after N steps of this run (resume later)")
    a(
        "--max-minutes",
        type=float,
        help="without --steps: train for this many minutes in all "
        "(set-up and final evaluation included), the schedule on the time; with --steps: stop "
        "after this long (then evaluate, save)",
    )
    a("--threads", type=int, help="torch threads per process")
    a("--peak-gflops", type=float, help="matmul peak for MFU (default: measured at the start)")
    a("--no-peak", dest="measure_peak", action="store_false", default=None, help="no MFU")
    a("--device", choices=["auto", "cpu", "cuda"], help="default auto")
    a("--bf16", action="store_true", default=None, help="bf16 autocast (GPU; CPU: AMX only)")
    a("--num-workers", type=int, help="DataLoader workers (default 0)")
    a("--no-progress", dest="progress", action="store_false", default=None, help="no tqdm bar")
    a("--no-plots", dest="plots", action="store_false", default=None, help="no PNG plots")
    return p


def _process_start() -> float:
    """This process's start on ``time.perf_counter``'s scale, so that ``--max-minutes`` counts
    Python's start-up and imports (seconds on a busy machine) as part of the minutes."""
    import time

    try:
        import psutil  # installed with Jupyter's kernel; without it, count from now
    except ImportError:
        return time.perf_counter()
    return time.perf_counter() - (time.time() - psutil.Process().create_time())


def _mask_split(text: str) -> MaskSplit:
    try:
        return MaskSplit.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _fill_mask_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(
        prog=f"{PROG} fill-mask",
        description="Print a trained model's top predictions for each [MASK] in a sentence.",
    )
    p.add_argument("--checkpoint", required=True, help="output or checkpoint folder of a run")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("text", nargs="+", help='e.g. "return the [MASK] of the list."')
    args = p.parse_args(argv)
    if args.top_k < 1:
        p.error(f"--top-k must be at least 1, got {args.top_k}")
    model, tokenizer = load_checkpoint(args.checkpoint)
    for text in args.text:
        print(text)
        try:
            filled = fill_mask(model, tokenizer, text, args.top_k)
        except ValueError as e:
            p.error(str(e))
        for i, preds in enumerate(filled):
            shown = "  ".join(f"{x.token} {format_probability(x.probability)}" for x in preds)
            print(f"  [MASK] {i + 1}: {shown}")


def _evaluate_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(
        prog=f"{PROG} evaluate",
        description="Held-out metrics of saved runs, on the set their training reported.",
    )
    p.add_argument("checkpoints", nargs="+", help="output or checkpoint folders of runs")
    p.add_argument("--eval-seq-length", type=int, help="held-out pair length (default: the run's)")
    p.add_argument(
        "--transformers",
        action="store_true",
        help="also score the weights with transformers' BertForPreTraining (a check from outside)",
    )
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    results = {}
    for path in args.checkpoints:
        r = results[path] = evaluate_checkpoint(
            path, eval_seq_length=args.eval_seq_length, with_transformers=args.transformers
        )
        print(
            f"{path}: MLM acc {r['mlm_acc']:.3f} ([MASK] only {r['mlm_acc_at_mask']:.3f}; "
            f"unigram {r['unigram_baseline']['mlm_acc']:.3f}), MLM loss {r['mlm_loss']:.3f}, "
            f"NSP acc {r['nsp_acc']:.3f} ({r['n_predictions']} predictions, {r['n_pairs']} "
            f"pairs of <= {r['seq_length']} tokens)"
        )
        if args.transformers:
            t = r["transformers"]
            print(
                f"  transformers' BertForPreTraining, same weights: MLM acc {t['mlm_acc']:.3f} "
                f"([MASK] only {t['mlm_acc_at_mask']:.3f}), NSP acc {t['nsp_acc']:.3f}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def main(argv: list[str] | None = None) -> dict | None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "fill-mask":
        _fill_mask_main(argv[1:])
        return None
    if argv and argv[0] == "evaluate":
        _evaluate_main(argv[1:])
        return None
    if argv and argv[0] == "train":
        argv = argv[1:]
    parser = _train_parser()
    args = vars(parser.parse_args(argv))
    given = {k: v for k, v in args.items() if v is not None}
    if "word_source" in given:  # --whole-word-masking [gold|jieba]
        given["whole_word_mask"] = True
    try:
        base = PretrainConfig.for_language(given.get("lang", "en"))
    except ValueError as e:  # an unknown --lang
        parser.error(str(e))
    if given.get("resume"):
        # The saved settings, except the per-invocation limits.
        base = PretrainConfig.load(given["resume"]).replace(stop_after=None, max_minutes=None)
    try:
        cfg = base.replace(**given)
    except ValueError as e:  # e.g. an unknown --lang
        parser.error(str(e))
    if cfg.whole_word_mask and cfg.word_source == "jieba":
        from bertcourse.zh import jieba_module

        try:
            jieba_module()
        except ImportError as e:  # an optional package, not installed: say which, before any work
            parser.error(str(e))
    if not given.get("resume"):
        cfg = cfg.replace(resume=None)
        if "max_minutes" in given and "steps" not in given:
            cfg = cfg.replace(steps=None)  # the schedule fits itself to the time given
    report = run(cfg, started_at=_process_start())
    teardown_distributed()
    return report


if __name__ == "__main__":
    main()
