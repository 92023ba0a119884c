"""Ray job entrypoint: a whole study, any registered method (collect -> fit -> evaluate -> report).

    ray job submit --address http://HEAD:8265 --working-dir . -- \\
        python jobs/study.py CONFIG.toml [--set study.output=s3://bucket/x] [--set engine.kind=...]

``[study] method`` in the config picks PRISM, URW or any registered method. Inside a job,
``ray.init()`` attaches to the cluster that runs it (RAY_ADDRESS is set).
"""

import sys

from judgecal.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]], owns_process=True))
