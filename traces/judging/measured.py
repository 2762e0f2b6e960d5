"""What each judge was measured to be worth against gold (docs/judging.md), and what follows:
the default judge, the warning beside the embedded model's grades, the line every judged
comparison shows. Filled from `hoptrace judge-validity` runs; a key is what a judgment records
as its judge and prompt version."""
from __future__ import annotations

from typing import Optional

AUC_NEEDED = 0.75    # below this against gold, a judge is not offered as the default
TAU_LIKE_GOLD = 0.7  # a Kendall tau under this, or a pair verdict gold does not give: "ranks unlike gold"

# judge key → figures on the demo (MuSiQue) and the bundled 2Wiki set. Filled from `hoptrace
# judge-validity` runs; the key is what a judgment records as its judge and prompt version.
# docs/judging.md, 2026-11-25: depth-10 pools of bm25, dense, rrf_hybrid, composed, griever and naivege;
# the demo's first 50 questions (experiment 8cab838fcea3) and 2Wiki's first 50 (462feada5b99), the LLM
# judge on 2Wiki's first 32 (stopped there for time); `hoptrace judge-validity ID --judge answer|llm`.
_RULE = "answer-in-passage (SQuAD-normalised, word boundaries) · answer-rule-1"
_QWEN = "qwen2.5-coder-1.5b · listwise-1"
MEASURED: dict[str, dict] = {
    _RULE: {
        "demo": {"questions": 50, "pairs": 1030, "auc": 0.686, "precision": 0.720, "recall": 0.387, "kappa": 0.470,
                 "tau": 0.733, "same_verdicts": 14, "verdicts": 15},
        "2wiki": {"questions": 50, "pairs": 1104, "auc": 0.690, "precision": 0.850, "recall": 0.386, "kappa": 0.507,
                  "tau": 0.867, "same_verdicts": 13, "verdicts": 15},
    },
    _QWEN: {
        "demo": {"questions": 50, "pairs": 1030, "auc": 0.684, "precision": 0.278, "recall": 0.452, "kappa": 0.262,
                 "tau": 0.600, "same_verdicts": 14, "verdicts": 15},
        "2wiki": {"questions": 32, "pairs": 781, "auc": 0.755, "precision": 0.301, "recall": 0.557, "kappa": 0.322,
                  "tau": 0.414, "same_verdicts": 13, "verdicts": 15},
    },
}


def key(judgment_judge: str, prompt_version: str) -> str:
    return f"{judgment_judge} · {prompt_version}"


def measured_line(judge_key: str) -> str:
    """The judge's measured agreement with gold, and what to do where it ranks methods unlike gold."""
    m = MEASURED.get(judge_key)
    if not m:
        return f"{judge_key}: agreement with gold not measured (docs/judging.md)"
    line = f"{judge_key}: measured against gold (docs/judging.md) — " + "; ".join(
        f"{where}: AUC {v['auc']:.2f}, κ {v['kappa']:.2f}, Kendall τ of the methods {v['tau']:+.2f}, "
        f"{v['same_verdicts']} of {v['verdicts']} pair verdicts as gold's" for where, v in m.items())
    unlike = [where for where, v in m.items() if v["tau"] < TAU_LIKE_GOLD or v["same_verdicts"] < v["verdicts"]]
    if unlike:
        line += (f". It ranks the methods unlike gold on {', '.join(unlike)} (a lower τ, or a significant gold "
                 "verdict it calls inconclusive): read its verdicts as a first pass; a person's grades in the Judge "
                 "tab override it pair by pair, and an endpoint (--llm URL) judges with a stronger model")
    return line


def reliable(judge_key: str) -> bool:
    m = MEASURED.get(judge_key)
    return bool(m) and all((v.get("auc") or 0) >= AUC_NEEDED for v in m.values())


def default_judge(llm_spec: Optional[str]) -> str:
    """The LLM judge only where it was shown to agree with gold; else the answer rule."""
    return "answer"


def why_default(llm_spec: Optional[str]) -> str:
    q = MEASURED[_QWEN]
    return (f"No LLM judge on the embedded model agrees with gold well enough to be the default: its listwise judge "
            f"reached AUC {q['demo']['auc']:.2f} on the demo and {q['2wiki']['auc']:.2f} on 2Wiki, under the "
            f"{AUC_NEEDED} asked on the demo (docs/judging.md). The answer rule judges by default; a person's grades "
            "in the app's Judge tab override it, and --judge llm with an endpoint (--llm URL) judges with a "
            "stronger model")


def warning(llm) -> str:
    if llm is not None and llm.settings.backend == "local":
        q = MEASURED[_QWEN]
        return (f"the embedded model's judge reached AUC {q['demo']['auc']:.2f} against gold on the demo and "
                f"{q['2wiki']['auc']:.2f} on 2Wiki, Cohen's κ {q['demo']['kappa']:.2f} / {q['2wiki']['kappa']:.2f} "
                "(docs/judging.md): treat its grades as a first pass for a person to check, not as evidence")
    return ""


