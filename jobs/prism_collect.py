"""Ray job entrypoint: only the collection stage (fan out probes to judge actors, commit Parquet parts).

    ray job submit --address http://HEAD:8265 --working-dir . -- python jobs/prism_collect.py CONFIG.toml
"""

import sys

from judgecal.cli import main

if __name__ == "__main__":
    sys.exit(main(["collect", *sys.argv[1:]]))
