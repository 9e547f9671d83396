"""What every attack must get: its score out of 11 and the verdicts its cases may have.

Graded against specs/dot_product_scores.yaml (11 points: examples 3 + 2 + 2 hidden, properties
1 + 1 + 1 + 1, the last one non_contiguous_inputs). A set of several verdicts means the case may
end either way depending on timing (for example a memory bomb whose later cases run out of the
submission's total time).

non_contiguous_inputs compares the result on views with the same submission's result on
contiguous tensors (each case judges only its own property), so a submission that returns the
same wrong values, or the same NaNs, either way keeps that 1 point; the value cases take the rest.
"""

from __future__ import annotations

P, VALUE, SHAPE, DTYPE, NAN = "passed", "wrong_value", "wrong_shape", "wrong_dtype", "non_finite"
RAISE, TIME, MEM, CRASH = "exception", "timeout", "memory_limit", "crashed"
MISSING, TYPE, ERR = "function_missing", "bad_return_type", "grader_error"

# name: (score, allowed verdicts for every case, required verdict of the first case or None)
EXPECTATIONS: dict[str, tuple[int, frozenset[str], str | None]] = {
    "infinite_loop": (0, frozenset({TIME}), TIME),
    "sleeping": (0, frozenset({TIME}), TIME),
    "memory_bomb": (0, frozenset({MEM, TIME}), MEM),
    "memory_bomb_torch": (0, frozenset({MEM, TIME}), MEM),
    "memory_bomb_at_import": (0, frozenset({MEM}), MEM),
    "fork_bomb": (0, frozenset({TIME}), TIME),
    "orphan_daemon": (11, frozenset({P}), P),
    "os_exit_at_import": (0, frozenset({CRASH}), CRASH),
    "sys_exit_at_import": (0, frozenset({RAISE}), RAISE),
    "os_exit_in_call": (0, frozenset({CRASH, TIME}), CRASH),
    "sys_exit_in_call": (0, frozenset({RAISE}), RAISE),
    "segfault": (0, frozenset({CRASH, TIME}), CRASH),
    "keyboard_interrupt": (0, frozenset({RAISE}), RAISE),
    "base_exception_subclass": (0, frozenset({RAISE}), RAISE),
    "runaway_recursion": (0, frozenset({RAISE}), RAISE),
    "stack_overflow": (0, frozenset({TIME, MEM, CRASH, RAISE}), None),
    "fake_results_stdout": (1, frozenset({VALUE, P}), VALUE),
    "writes_results_file": (1, frozenset({VALUE, P}), VALUE),
    "monkeypatch_comparisons": (1, frozenset({VALUE, P}), VALUE),
    "lying_ndarray": (1, frozenset({VALUE, P}), VALUE),
    "lying_tensor": (1, frozenset({VALUE, P}), VALUE),
    "lying_array_protocol": (0, frozenset({TYPE}), TYPE),
    "raising_float": (0, frozenset({TYPE}), TYPE),
    "generator": (0, frozenset({TYPE}), TYPE),
    "huge_array": (0, frozenset({TYPE}), TYPE),
    # int64 of the rounded right answer: right values where the answer is a whole number (E2, P4).
    "wrong_dtype_int": (1, frozenset({DTYPE, P}), None),
    # float16 of the right answer: exact where float16 holds it (E2, E3, P4); wrong elsewhere.
    "wrong_dtype_float16": (6, frozenset({P, DTYPE, VALUE}), None),
    "nan_output": (1, frozenset({NAN, P}), NAN),
    "mutates_inputs": (11, frozenset({P}), P),
    "reads_spec_files": (1, frozenset({VALUE, P}), VALUE),
    "reads_case_cache": (1, frozenset({VALUE, P}), VALUE),
    "reads_environment": (1, frozenset({VALUE, P}), VALUE),
    "kills_parent": (11, frozenset({P}), P),
    "signals_self": (11, frozenset({P}), P),
    "flood_output": (11, frozenset({P}), P),
    "non_utf8_output": (11, frozenset({P}), P),
    "network_connect": (11, frozenset({P}), P),
    "imports_grader": (1, frozenset({VALUE, P}), VALUE),
    "forged_wire_messages": (0, frozenset({CRASH, TIME}), CRASH),
    # An exception that cannot be printed, from a class that lies about its name: still "exception".
    "raising_str_exception": (0, frozenset({RAISE}), RAISE),
    # A 6 s import, then calls that hang: restarts share one setup budget, the total limit holds.
    "slow_import_then_hang": (0, frozenset({TIME}), TIME),
    # Remembers hidden inputs and repeats them in later messages, class names and output.
    "leaks_hidden_inputs": (0, frozenset({RAISE}), RAISE),
    # A forged "module not found" for an installed module the worker can read: its own exception,
    # never a grader error (the grader checks the claim against the files itself).
    "spoofs_missing_module": (0, frozenset({RAISE}), RAISE),
    # The same with a PermissionError naming a readable file of the installation (torch/__init__.py).
    "spoofs_unreadable_file": (0, frozenset({RAISE}), RAISE),
    # Right values for the visible examples only: their 5 points, and non_contiguous_inputs (same values either way).
    "hardcoded_visible": (6, frozenset({P, VALUE}), P),
    # A 3,000-deep folder chain at import (shutil.rmtree raised RecursionError): full marks, nothing left.
    "deep_folder_chain": (11, frozenset({P}), P),
    # Closes its stdout and stderr: right answers, and the grader sleeps until they come.
    "closes_its_output": (11, frozenset({P}), P),
    # Kernel objects that outlive a worker, filled with every call's inputs (right answers): refused
    # by seccomp, and a worker's own IPC namespace and the uid sweep leave nothing for the next one.
    "leaves_sysv_shm": (11, frozenset({P}), P),
    "leaves_sysv_msg": (11, frozenset({P}), P),
    "leaves_sysv_sem": (11, frozenset({P}), P),
    "leaves_posix_mqueue": (11, frozenset({P}), P),
    "leaves_keyring_key": (11, frozenset({P}), P),
    # Memory outside RLIMIT_AS in memfds filled with write() (right answers): memfd_create is refused.
    "memfd_hog": (11, frozenset({P}), P),
}


# Attacks on how in-place mutation and load failures are judged (tests/hostile/mutation/), each
# graded against its own spec (they need the inputs_not_mutated property):
# name: (spec file, the inputs the inputs_not_mutated message must name, exact score lost or None)
# The first three are held-out mistakes that change only metadata (shape, strides): before the
# grader judged mutation by value, shape and strides they lost exactly the property's point.
MUTATION_ATTACKS: dict[str, tuple[str, str, int | None]] = {
    "transposes_keys_in_place": ("scaled_score_matrix.yaml", "K", 1),
    "transposes_weight_in_place": ("bilinear_scores.yaml", "W", 1),
    "unsqueezes_v_in_place": ("additive_scores.yaml", "v", 1),
    # restores Q before the reply through every patched path the worker could use to send it
    "patches_send_to_restore": ("scaled_score_matrix.yaml", "Q", None),
    # a thread restores Q the moment the call's frame is gone
    "thread_restores_later": ("scaled_score_matrix.yaml", "Q", None),
    # a finalizer run by the collector after the call restores Q and K
    "finalizer_restores": ("scaled_score_matrix.yaml", "Q, K", None),
}
# Correct files that forge a load_error with verdict grader_error while imported: never a grader
# error (no exit 3, nothing graded again), every case the submission's own crash.
FORGED_LOAD_ERRORS: dict[str, str] = {
    "forges_load_error": "scaled_score_matrix.yaml",
    "forges_load_error_late": "scaled_score_matrix.yaml",
}
