"""judgecal: make LLM judges agree with people (PRISM, URW) at cluster scale.

Importing this package has no side effects: no Ray, no engine, no I/O.
"""

__version__ = "0.1.0"
