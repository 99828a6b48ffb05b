"""The one place that decides exit codes (SPEC §2)."""

EXIT_OK = 0  # nothing to do, or everything written and nothing left for a human
EXIT_CHANGES = 1  # changes needed (--diff/--check) or findings that need a human remain
EXIT_ERROR = 2  # usage error, unreadable or unparsable input, internal error
EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT


def exit_code(*, errors: int, findings: int, pending_changes: int) -> int:
    if errors:
        return EXIT_ERROR
    if findings or pending_changes:
        return EXIT_CHANGES
    return EXIT_OK
