"""Ray job entrypoint: only the collection stage of a study, any registered method (fan out the
plan to judge actors; the workers commit Parquet parts to the study's workspace).

    ray job submit --address http://HEAD:8265 --working-dir . -- python jobs/collect.py CONFIG.toml [--set ...]

Exits 3 with one line while requests still fail; rerun it to retry them.
"""

import sys

from judgecal.cli import main

if __name__ == "__main__":
    sys.exit(main(["collect", *sys.argv[1:]], owns_process=True))
