"""A module of the training script's own folder: it appends a line to a log file."""


def log_line(path: str, text: str) -> None:
    with open(path, "a", encoding="utf-8") as log:
        log.write(text + "\n")
