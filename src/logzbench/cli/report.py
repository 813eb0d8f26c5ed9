"""``logzbench report``: tables and plots from estimate JSON files."""

from __future__ import annotations

import json

from .outputs import check_outputs

HELP = "tables and plots from estimate JSON files"


def add(p) -> None:
    """The flags of ``logzbench report`` on its parser ``p``."""
    p.add_argument("results", nargs="+", help="estimate .json files or directories holding them")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--paper",
        action="append",
        default=[],
        metavar="MODEL=PAPER:ROW",
        help="the published row a model stands for (table_papers.csv), e.g. "
        "mnist-rbm20=burda_raise:mnistCD1-20; repeat for more models",
    )


def run(args) -> int:
    from ..report import build_report
    from ..report.papers import check_paper_rows, parse_paper_rows
    from ..report.records import find_records

    check_outputs(dirs=[("--out", args.out)])
    paper_rows = check_paper_rows(parse_paper_rows(args.paper))  # before reading any result
    if not find_records(args.results):  # (malformed or foreign JSON named directly is refused there)
        raise ValueError(
            f"no estimate records in {' '.join(map(str, args.results))}: expected the JSON files "
            "`logzbench estimate --json` or the workflow writes"
        )
    from ..utils import output_transaction

    with output_transaction() as tx:  # every file of the report, or none (a new --out removed again)
        tx.watch_dir(args.out)
        out = build_report(args.results, args.out, paper_rows=paper_rows, check_papers=True)
    print(json.dumps({"report": str(args.out), **out}, default=str))
    return 0
