"""Ray job entrypoint: a study grid (see judgecal/studies/grid.py for the file's shape).

    ray job submit --address http://HEAD:8265 --working-dir . -- python jobs/study_grid.py GRID.toml

Every study of the grid collects (resumably) and runs once; every variant ([grid.vary]:
designs, representations, penalties) is evaluated on its responses without re-collecting,
its log kept as grid/<variant>.json in the study's folder. Prints one summary row per
(study, variant).
"""

import sys

from judgecal.cli import main

if __name__ == "__main__":
    sys.exit(main(["grid", *sys.argv[1:]], owns_process=True))
