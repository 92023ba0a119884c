"""The one error type users see for bad input: one line, names the place, exit code 2."""


class InputError(ValueError):
    """Bad user input. ``where`` names the file, row or field; the CLI prints one line and exits 2."""

    exit_code = 2

    def __init__(self, where: str, problem: str):
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")
