"""The worked-example study: the documents' worked examples replayed, their numbers audited."""

from sdpa_cli.framework.declaration import Flag, Rate, Study
from sdpa_cli.studies.worked_example import cost, reconcile, replay, steps
from sdpa_cli.studies.worked_example.spec import WorkedExampleSpec

STUDY = Study(
    topic="audit",
    # fitted to four timed batches of the shipped specs (the changelog has them)
    rate=Rate(0.05, 0.0, extra=cost.figure_seconds),
    spec=WorkedExampleSpec,
    run=replay.run,
    rows=(steps.StepRow,),
    figures={"worked.weights": "figures:draw_weights"},
    cost=cost.cost,
    documented_problem=reconcile.documented_problem,
    examples=({"title": "tiny", "source": "a note", "parts": [
        {"name": "tiny", "kind": "attention", "q": [[1, 0]], "k": [[1, 0], [0, 1]],
         "v": [[1, 2], [3, 4]]}]},),
    description="The documents' worked examples step by step, and an audit of their numbers.",
    usage=("sdpa worked-example --list",
           "sdpa worked-example money-bank-grows --expand",
           "sdpa worked-example my-notes.yaml --check      exit 1 if a number disagrees",
           "sdpa worked-example --all --format json"),
    flags={"expand": Flag(switch=True)},
    no_flag=("parts",),
)
