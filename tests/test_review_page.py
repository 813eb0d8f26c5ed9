"""The review page (issue 27, item 3): ``review.html``, one self-contained page a person reads at 1366x768.

The unit tests build a report (:func:`logzbench.report.build_report`) from small fabricated records (the
``rec`` builder of ``test_report.py``, and a sandwich written as the workflow writes it, from
``test_bracket_report.py``) and read the page's HTML: every model has a section and a contents entry; each
estimate shows its standard error, the exact value and the difference from it, and every flag reason in
words; the bracket where there is one; the report's tables as ``<table>`` elements; the figures as
``data:`` URIs; names escaped.

The browser test loads the page in a headless Chromium at 1366x768 (``--headless=new``): it keeps a
screenshot (``review_1366x768.png`` in ``$LOGZBENCH_TEST_ARTIFACTS``, else the test's ``tmp_path``), and on a
copy of the page with a small script injected it reads back, with ``--dump-dom``, the document's scroll
width, the window's width and the right edges of the estimate, standard-error and flag-reason cells: none is
wider than the window.  The same check on a copy made 3000 px wide, and on one whose estimate tables are
2000 px wide, must fail, so that the check is shown to detect what it looks for.  Without a ``chromium``
(Debian: ``apt-get install -y chromium``) the browser tests skip.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import headless, write_estimate_record
from test_bracket_report import EXACT_LL, EXACT_LOG_Z, _sandwich_result, _settings
from test_report import agreeing_model, rec

from logzbench.estimators.result import EstimateResult
from logzbench.report import build_report
from logzbench.report.review import fmt_difference, fmt_estimate, fmt_se, review_html, split_reasons

#: a model name that is HTML markup (it must be escaped wherever it is shown)
MARKUP = "dbm<b>&x"
#: a model whose AIS log Z is 1e-6 above the exact value: equal at 4 decimals, not in the difference
CLOSE = "close"
WIDTH, HEIGHT = 1366, 768


# --------------------------------------------------------------------------- the report of fabricated records
def _bracket_records(root: Path) -> list[Path]:
    """Model ``m``: its exact value and one sandwich (bracket on log Z [9.6, 10.3], containing the exact 10)."""
    exact = EstimateResult(
        estimator="exact",
        log_z=EXACT_LOG_Z,
        log_z_stderr=0.0,
        mean_log_likelihood=EXACT_LL,
        mean_log_likelihood_stderr=0.5,
        per_example_log_likelihood=np.full(20, EXACT_LL),
    )
    sandwich = _settings(
        "m",
        "sandwich",
        "sandwich",
        K=10,
        init="base-rate",
        seed=0,
        schedule="adaptive",
        chains=100,
        target_width=1.0,
        max_sweeps=10**6,
        confidence=0.95,
    )
    return [
        write_estimate_record(root, _settings("m", "exact", "exact"), exact, "exact"),
        write_estimate_record(root, sandwich, _sandwich_result(0, (9.6, 10.3), (-20.4, -19.7)), "seed0"),
    ]


def _bad() -> list[dict]:
    """AIS with too low an ESS, RAISE 10 nats above AIS: both flagged, with several reasons."""
    return [
        rec("bad", "ais", K=100, init="uniform", ll=-90.0, log_z=3.0, ess=2.0),
        rec("bad", "raise", K=100, init="uniform", ll=-80.0, ess=50.0),
    ]


def _records() -> list[dict]:
    close = [
        rec(CLOSE, "exact", ll=-50.0, log_z=20.0, ll_se=0.5, chains=0),
        rec(CLOSE, "ais", K=100, init="uniform", ll=-50.0, log_z=20.000001, ess=90.0),
    ]
    return agreeing_model("good") + agreeing_model(MARKUP, exact=-80.0) + _bad() + close


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``(paths, html text, summary)`` of a report with figures of the fabricated records."""
    root = tmp_path_factory.mktemp("review")
    files = _bracket_records(root)
    paths = build_report([*_records(), *files], root / "report", models=["no-estimates"])
    summary = pd.read_csv(paths["summary"], keep_default_na=False, na_values=[""])
    return paths, paths["review"].read_text(encoding="utf-8"), summary


#: the cell classes the page marks (a cell without one is named ``col<i>`` by its place in its row)
_CELL_CLASSES = ("estimator", "estimate", "se", "diff", "flag", "lower", "upper")


class _Page(HTMLParser):
    """The page's sections (``data-model``), their estimate rows (cell texts by class) and bracket rows,
    the contents' links, the images' sources and the rendered tables' names."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sections: dict[str, dict] = {}
        self.links: list[str] = []
        self.images: list[str] = []
        self.data_tables: list[str] = []
        self._section = None
        self._table = None
        self._row = None
        self._cell = None
        self._in_nav = False
        self._in_head = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "nav":
            self._in_nav = True
        elif tag == "a" and self._in_nav:
            self.links.append(a.get("href", ""))
        elif tag == "section" and "model" in cls:
            self._section = self.sections.setdefault(a["data-model"], {"id": a["id"], "rows": [], "brackets": []})
        elif tag == "table":
            self._table = "brackets" if "brackets" in cls else "rows" if "estimates" in cls else None
            if "data" in cls:
                self.data_tables.append(a.get("data-table", ""))
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr" and self._section is not None and self._table and not self._in_head:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            named = [c for c in cls if c in _CELL_CLASSES]
            self._cell = (named[0] if named else f"col{len(self._row)}", [])
            self._row.append(self._cell)
        elif tag == "img":
            self.images.append(a.get("src", ""))

    def handle_endtag(self, tag):
        if tag == "nav":
            self._in_nav = False
        elif tag == "section":
            self._section = None
        elif tag == "table":
            self._table = None
        elif tag == "thead":
            self._in_head = False
        elif tag == "tr" and self._row is not None:
            self._section[self._table].append([(k, " ".join(" ".join(t).split())) for k, t in self._row])
            self._row = None
        elif tag in ("td", "th"):
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1].append(data)


def _page(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    return p


def _row(page: _Page, model: str, estimator: str) -> dict[str, list[str]]:
    """The estimate row of ``estimator`` (its label) in ``model``'s section: ``{cell class: [texts]}``."""
    for row in page.sections[model]["rows"]:
        if row[0][1] == estimator:
            out: dict[str, list[str]] = {}
            for k, v in row:
                out.setdefault(k, []).append(v)
            return out
    raise AssertionError(f"no row {estimator!r} in {model!r}: {[r[0][1] for r in page.sections[model]['rows']]}")


# --------------------------------------------------------------------------- the content
def test_review_is_written_and_listed(built):
    paths, text, _ = built
    out = paths["review"]
    assert out.name == "review.html" and out.parent == paths["summary"].parent
    rep = json.loads(paths["report_json"].read_text())
    assert rep["files"]["review"] == str(out)
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")


def test_every_model_has_a_section_and_a_contents_entry(built):
    _, text, summary = built
    page = _page(text)
    models = set(summary["model"]) | {"m", "no-estimates"}
    assert set(page.sections) == models
    for m, sec in page.sections.items():
        assert f"#{sec['id']}" in page.links, m
    assert len({s["id"] for s in page.sections.values()}) == len(models)  # one anchor each
    assert "No estimates of this model." in text  # the declared model without estimates is listed too


def test_estimate_standard_error_exact_and_difference(built):
    _, text, summary = built
    page = _page(text)
    s = summary.set_index(["model", "estimator", "init"]).loc[("good", "ais", "uniform")]
    row = _row(page, "good", "AIS (uniform)")
    # log Z and the mean test log-likelihood, each with its s.e. (2 significant digits) and difference
    assert row["estimate"] == [f"{s['log_z']:.4f}", f"{s['mean_test_ll']:.4f}"] == ["49.9500", "-99.9450"]
    assert row["se"] == ["0.0071", "0.035"]
    assert row["diff"][0].startswith("-0.0500") and row["diff"][1].startswith("+0.0550")
    assert "1.6 s.e." in row["diff"][1]  # 0.055 / 0.0354
    assert row["col1"] == ["1000"] and row["col2"] == ["2"]  # K, seeds
    sec = re.search(r'<section class="model" id="[^"]+" data-model="good">(.*?)</section>', text, re.S).group(1)
    assert "<dt>Exact log Z</dt><dd>50.0000</dd>" in sec
    assert "<dt>Exact mean test log-likelihood</dt><dd>-100.0000</dd>" in sec
    exact = _row(page, "good", "exact")
    assert exact["estimate"] == ["50.0000", "-100.0000"] and exact["diff"][0].startswith("+0.0000")
    # a model without an exact value has no difference columns
    assert "diff" not in _row(page, "bad", "AIS (uniform)")


def test_difference_is_shown_where_rounding_would_hide_it(built):
    """AIS 1e-6 above the exact log Z: both read 20.0000, the difference column says by how much."""
    _, text, _ = built
    page = _page(text)
    ais, exact = _row(page, CLOSE, "AIS (uniform)"), _row(page, CLOSE, "exact")
    assert ais["estimate"][0] == exact["estimate"][0] == "20.0000"
    d = ais["diff"][0].split()[0]
    assert d != "+0.0000" and float(d) == pytest.approx(1e-6, rel=1e-2)


def test_every_flag_reason_in_words(built):
    _, text, summary = built
    page = _page(text)
    flagged = summary[summary["flags"].fillna("") != ""]
    assert set(flagged["model"]) == {"bad"}
    for _, s in flagged.iterrows():
        label = {"ais": "AIS (uniform)", "raise": "RAISE (uniform)"}[s["estimator"]]
        cell = _row(page, "bad", label)["flag"][0]
        reasons = split_reasons(s["flags"])
        assert len(reasons) >= 2
        for reason in reasons:
            assert " ".join(reason.split()) in cell, (reason, cell)
        assert "<li>" + html.escape(reasons[0]) + "</li>" in text  # each reason its own list item, escaped
    assert "low ESS" in _row(page, "bad", "AIS (uniform)")["flag"][0]
    assert _row(page, "good", "AIS (uniform)")["flag"] == ["none"]
    # the contents say which models are flagged, with the first reason in short
    nav = text[text.index("<nav") : text.index("</nav>")]
    assert "2 settings, 2 flagged: low ESS" in nav and "0 flagged" in nav


def test_bracket_shown_where_the_sandwich_ran(built):
    paths, text, _ = built
    page = _page(text)
    (z,) = [r for r in page.sections["m"]["brackets"] if r[1][1].startswith("log Z")]
    cells = dict(z)
    assert z[0][1].startswith("sandwich (seed 0)")
    assert cells["lower"].startswith("9.6000") and "AIS" in cells["lower"] and "guaranteed bound" in cells["lower"]
    assert "stochastic lower bound of log Z" in cells["lower"]
    assert cells["upper"].startswith("10.3000") and "approximate, no guarantee" in cells["upper"]
    assert "inside" in z[5][1] and z[5][1].startswith("10.0000")  # the exact log Z, inside the bracket
    assert "target 1: reached" in z[4][1]
    assert any(r[1][1].startswith("mean log-likelihood") for r in page.sections["m"]["brackets"])
    for m in ("good", "bad", CLOSE):  # no bracket, no bracket table
        assert page.sections[m]["brackets"] == []
    assert "table_bracket" in page.data_tables


def test_tables_rendered_and_figures_embedded(built):
    paths, text, _ = built
    page = _page(text)
    for name in ("table1", "summary", "flags", "table_bracket", "annealed_trials"):  # those with rows
        assert name in page.data_tables, name
    for name in ("table2", "table_continuous"):  # header only (no DBMs, no continuous models): their columns
        assert re.search(f'id="table-{name}"><summary>[^<]*</summary><p class="note">No rows \\(columns: model', text)
    assert re.search(r'<table class="data" data-table="table1">.*?<td>good</td>', text, re.S)
    # every image is an embedded PNG (one per figure drawn), and nothing is loaded from elsewhere
    drawn = [*paths["plots"].values(), *paths["trial_plots"].values(), *paths["bracket_plots"].values()]
    assert len(page.images) == len(drawn) + 1  # and plots/model_size.png
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<script" not in text.lower() and "<link" not in text.lower()
    assert not re.search(r'(?:src|href)="(?!#|data:)', text)
    # a model's own figures are in its section
    sec = text[text.index('data-model="good"') : text.index("</section>", text.index('data-model="good"'))]
    assert sec.count("<img ") >= 2 and "good_bias_mse.png" in sec


def test_names_are_escaped(built):
    _, text, _ = built
    page = _page(text)
    assert MARKUP in page.sections  # the parsed (unescaped) name is the model's
    assert "<b>&x" not in text and html.escape(MARKUP) in text
    assert "&lt; 10%" in text  # the reason's "(< 10%)"


def test_number_formats():
    assert fmt_estimate(-99.945, 0.0354) == "-99.9450"
    assert fmt_estimate(-99.94512345, 0.000123) == "-99.94512"  # more decimals for a small s.e. (0.00012)
    assert fmt_se(0.01) == "0.010" and fmt_se(0.0707) == "0.071" and fmt_se(12.3) == "12" and fmt_se(1.54) == "1.5"
    assert fmt_se(float("nan")) == "" and fmt_estimate(None) == ""
    assert fmt_difference(0.055) == "+0.0550" and fmt_difference(0.0) == "+0.0000"
    assert fmt_difference(-1e-6) == "-1.00e-06"  # not "-0.0000"
    assert fmt_difference(-1e-6, 1e-7) == "-0.00000100"  # a small s.e.: decimals enough for it


def test_review_html_of_an_empty_summary():
    """No estimates at all: a page with its (empty) contents, not an error."""
    summary = pd.DataFrame(columns=["model", "estimator", "method", "K", "init", "flags"])
    text = review_html(summary, tables={"table1": pd.DataFrame(columns=["model", "K"])})
    assert "0 models, 0 settings" in text and "No rows (columns: model, K)" in text


# --------------------------------------------------------------------------- the page in a browser
def _headless(chromium: str, page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """One headless Chromium run on ``page`` at 1366x768 with a fresh profile."""
    return headless(chromium, page.as_uri(), profile, *args, size=(WIDTH, HEIGHT), budget_ms=5000, timeout=120)


#: measures the loaded page and writes them into the attribute ``data-measure`` of ``<html>``
_MEASURE = """<script>
window.addEventListener("load", () => {
  const right = (sel) => Math.max(0, ...[...document.querySelectorAll(sel)].map(e => e.getBoundingClientRect().right));
  const d = document.documentElement;
  d.setAttribute("data-measure", JSON.stringify({
    scrollWidth: d.scrollWidth, clientWidth: d.clientWidth, innerWidth: window.innerWidth,
    estimate: right("td.estimate"), se: right("td.se"), flag: right("td.flag"), diff: right("td.diff"),
    anything: right("body *"),
    n_estimate: document.querySelectorAll("td.estimate").length,
    n_flag: document.querySelectorAll("td.flag").length,
    sections: [...document.querySelectorAll("section.model")].filter(s => s.getBoundingClientRect().height > 0)
      .map(s => s.dataset.model),
  }));
});
</script>"""


def _measure(chromium: str, text: str, where: Path, extra: str = "") -> dict:
    """The measures of ``text`` (with ``extra`` markup put first in its body) at 1366x768."""
    page = where / "page.html"
    page.write_text(text.replace("<body>", "<body>" + extra + _MEASURE, 1), encoding="utf-8")
    proc = _headless(chromium, page, where / "profile", "--dump-dom")
    found = re.search(r'data-measure="([^"]*)"', proc.stdout)
    assert found, f"no measures in the DOM; chromium stderr: {proc.stderr[-1500:]}"
    return json.loads(html.unescape(found.group(1)))


def _fits(m: dict) -> bool:
    """Nothing wider than the window: no horizontal scrolling, no cell beyond the window's right edge."""
    width = m["clientWidth"]
    return m["scrollWidth"] <= width and all(m[k] <= width for k in ("estimate", "se", "flag", "diff", "anything"))


def test_page_fits_1366_wide_and_lists_every_model(chromium, built, tmp_path):
    _, text, summary = built
    m = _measure(chromium, text, tmp_path)
    assert m["innerWidth"] == WIDTH, m  # the window the page was laid out in
    assert _fits(m), m
    assert m["scrollWidth"] <= m["clientWidth"] <= WIDTH
    assert 0 < m["estimate"] and 0 < m["se"] and 0 < m["flag"], m  # the cells exist and were laid out
    assert m["n_estimate"] >= len(summary) and m["n_flag"] == len(summary), m
    assert set(m["sections"]) == set(summary["model"]) | {"m", "no-estimates"}


@pytest.mark.parametrize(
    "extra",
    [
        '<div style="width:3000px">a deliberately wide element</div>',
        "<style>table.estimates { width: 2000px; max-width: none; }</style>",
    ],
    ids=["3000px-element", "2000px-tables"],
)
def test_the_width_check_detects_a_page_too_wide(chromium, built, tmp_path, extra):
    """The same measures on a copy made too wide: the check fails, so the test above can fail."""
    _, text, _ = built
    m = _measure(chromium, text, tmp_path, extra)
    assert not _fits(m), m
    if "2000px" in extra:  # the cells themselves beyond the window's edge
        assert m["flag"] > m["clientWidth"] and m["scrollWidth"] > m["clientWidth"], m


def test_screenshot_at_1366x768_is_kept(chromium, built, tmp_path, record_property):
    paths, _, _ = built
    keep = Path(os.environ.get("LOGZBENCH_TEST_ARTIFACTS") or tmp_path)
    keep.mkdir(parents=True, exist_ok=True)
    shot = keep / "review_1366x768.png"
    shot.unlink(missing_ok=True)
    proc = _headless(chromium, paths["review"], tmp_path / "profile", f"--screenshot={shot}")
    assert shot.is_file() and shot.stat().st_size > 20_000, proc.stderr[-1500:]
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) == (WIDTH, HEIGHT)
    record_property("screenshot", str(shot))
    print(f"\nreview page screenshot: {shot}")


# --------------------------------------------------------------------------- the MLflow run of the report
def test_report_run_logs_the_review_and_every_figure_as_png_and_pdf(tmp_path, monkeypatch):
    """``report_job`` hands the MLflow run ``report`` the review page (under ``review``) and each figure's PDF
    twin beside its PNG (under ``plots``); MLflow itself is replaced by a recorder (the logging is tested
    where it is written, :mod:`logzbench.tracking`)."""
    from logzbench import tracking
    from logzbench.report import report_job

    logged = {}
    monkeypatch.setattr(tracking, "set_flags", lambda *a, **k: 0)
    monkeypatch.setattr(tracking, "log_run", lambda name, **kw: logged.update(name=name, **kw))
    monkeypatch.setattr(tracking, "get_client", lambda uri: (_ for _ in ()).throw(RuntimeError("no MLflow here")))
    out = tmp_path / "results" / "report"
    pngs = [str(out / "plots" / f"{m}.png") for m in ("good", "bad")]
    paths = report_job(
        agreeing_model("good") + _bad(),
        out,
        thresholds={"gap_threshold": 1.0, "ess_fraction": 0.1, "z": 2.0, "truth_tolerance": 0.1},
        models=["good", "bad"],
        tracking={"enabled": True, "uri": "sqlite:///" + str(tmp_path / "mlflow.db"), "experiment": "exp"},
        plots=pngs,
    )
    assert logged["name"] == "report"
    artifacts = logged["artifacts"]
    assert artifacts[str(paths["review"])] == "review" and paths["review"].is_file()
    for png in pngs:
        pdf = png[: -len(".png")] + ".pdf"
        assert Path(pdf).is_file() and artifacts[png] == artifacts[pdf] == "plots", pdf
    assert not [a for a, d in artifacts.items() if d == "plots" and not a.endswith((".png", ".pdf"))]
