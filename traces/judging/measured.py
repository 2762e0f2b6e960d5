"""What each judge was measured to be worth against gold (docs/judging.md), and what follows:
the default judge, the warning beside the embedded model's grades, the line every judged
comparison shows. Filled from `hoptrace judge-validity` runs; a key is what a judgment records
as its judge and prompt version."""
from __future__ import annotations

from typing import Optional

AUC_NEEDED = 0.75    # below this against gold, a judge is not offered as the default
TAU_LIKE_GOLD = 0.6  # a Kendall tau under this: the judge orders the methods unlike gold does

# judge key → figures on the demo (MuSiQue) and the bundled 2Wiki set. Filled from `hoptrace
# judge-validity` runs; the key is what a judgment records as its judge and prompt version.
MEASURED: dict[str, dict] = {}


def key(judgment_judge: str, prompt_version: str) -> str:
    return f"{judgment_judge} · {prompt_version}"


def measured_line(judge_key: str) -> str:
    """The judge's measured agreement with gold, and what to do where it ranks methods unlike gold."""
    m = MEASURED.get(judge_key)
    if not m:
        return f"{judge_key}: agreement with gold not measured (docs/judging.md)"
    line = f"{judge_key}: measured against gold (docs/judging.md) — " + "; ".join(
        f"{where}: AUC {v['auc']:.2f}, κ {v['kappa']:.2f}, Kendall τ of the methods {v['tau']:+.2f}, "
        f"{v['same_verdicts']} pair verdicts as gold's" for where, v in m.items())
    unlike = [where for where, v in m.items() if v["tau"] < TAU_LIKE_GOLD]
    if unlike:
        line += (f". It ranks the methods unlike gold on {', '.join(unlike)}: read its verdicts as a first pass; a "
                 "person's grades in the Judge tab override it pair by pair, and an endpoint (--llm URL) judges "
                 "with a stronger model")
    return line


def reliable(judge_key: str) -> bool:
    m = MEASURED.get(judge_key)
    return bool(m) and all((v.get("auc") or 0) >= AUC_NEEDED for v in m.values())


def default_judge(llm_spec: Optional[str]) -> str:
    """The LLM judge only where it was shown to agree with gold; else the answer rule."""
    return "answer"


def why_default(llm_spec: Optional[str]) -> str:
    return ("No LLM judge on the embedded model reached an AUC of 0.75 against gold (docs/judging.md); the answer "
            "rule judges, a person's grades in the app's Judge view override it, and --judge llm with an "
            "endpoint (--llm URL) judges with a stronger model")


def warning(llm) -> str:
    if llm is not None and llm.settings.backend == "local":
        return ("the embedded model's judge did not reach an AUC of 0.75 against gold (docs/judging.md): treat its "
                "grades as a first pass for a person to check, not as evidence")
    return ""


