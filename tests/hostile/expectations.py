"""What every attack must get: its score out of 11 and the verdicts its cases may have.

Graded against specs/dot_product_scores.yaml (11 points: examples 3 + 2 + 2 hidden, properties
1 + 1 + 1 + 1, the last one non_contiguous_inputs). A set of several verdicts means the case may
end either way depending on timing (for example a memory bomb whose later cases run out of the
submission's total time).

non_contiguous_inputs compares the result on views with the same submission's result on
contiguous tensors, and earns its point only when those results are also right (a property that
does not compare values itself awards points only beside right values), so a submission that
returns the same wrong values, or the same NaNs, either way gets nothing for it. A mutation of an
input costs every case it happens in.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    "fake_results_stdout": (0, frozenset({VALUE, P}), VALUE),
    "writes_results_file": (0, frozenset({VALUE, P}), VALUE),
    "monkeypatch_comparisons": (0, frozenset({VALUE, P}), VALUE),
    "lying_ndarray": (0, frozenset({VALUE, P}), VALUE),
    "lying_tensor": (0, frozenset({VALUE, P}), VALUE),
    "lying_array_protocol": (0, frozenset({TYPE}), TYPE),
    "raising_float": (0, frozenset({TYPE}), TYPE),
    "generator": (0, frozenset({TYPE}), TYPE),
    "huge_array": (0, frozenset({TYPE}), TYPE),
    # int64 of the rounded right answer: a wrong dtype everywhere (P4's layouts point needs right values too).
    "wrong_dtype_int": (0, frozenset({DTYPE, P}), None),
    # float16 of the right answer: exact where float16 holds it (E2, E3, P1); wrong elsewhere.
    "wrong_dtype_float16": (5, frozenset({P, DTYPE, VALUE}), None),
    "nan_output": (0, frozenset({NAN, P}), NAN),
    # Right answers, then its inputs overwritten in place: every case's call mutates, so every case is lost.
    "mutates_inputs": (0, frozenset({VALUE}), VALUE),
    # The same, with torch.frombuffer patched at import to hand out copies: the worker's own input
    # builder is bound before the import, so its inputs are still the shared memory.
    "mutates_inputs_behind_copies": (0, frozenset({VALUE}), VALUE),
    "reads_spec_files": (0, frozenset({VALUE, P}), VALUE),
    "reads_case_cache": (0, frozenset({VALUE, P}), VALUE),
    "reads_environment": (0, frozenset({VALUE, P}), VALUE),
    "kills_parent": (11, frozenset({P}), P),
    "signals_self": (11, frozenset({P}), P),
    "flood_output": (11, frozenset({P}), P),
    "non_utf8_output": (11, frozenset({P}), P),
    "network_connect": (11, frozenset({P}), P),
    "imports_grader": (0, frozenset({VALUE, P}), VALUE),
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
    # Right values for the visible examples only: their 5 points (non_contiguous_inputs needs right values).
    "hardcoded_visible": (5, frozenset({P, VALUE}), P),
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
# name: (spec file, the inputs the inputs_not_mutated message must name, the score it must get or None)
# The first three are held-out mistakes that change only metadata (shape, strides) in every call:
# judged by value, shape and strides in every case, they lose every case (before, they lost only the
# property's point, and before that nothing).
MUTATION_ATTACKS: dict[str, tuple[str, str, int | None]] = {
    "transposes_keys_in_place": ("scaled_score_matrix.yaml", "K", 0),
    "transposes_weight_in_place": ("bilinear_scores.yaml", "W", 0),
    "unsqueezes_v_in_place": ("additive_scores.yaml", "v", 0),
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


# Attacks graded against their own specs (tests/hostile/<folder>/<name>.py), each with what its right
# values may earn at most. FlashAttention-2 (specs/flash_attention_2.yaml, 28 points): the forward-only
# cases are worth 10 (matches_reference 2, long_rows_match_reference 3, tile_edges_match_reference 2,
# inputs_not_mutated, dtype_device_follow_inputs, non_contiguous_inputs 1 each), its two rules 1 each; every other case
# (the four worked examples, logsumexp_matches_golden, gradients_match_golden) runs a backward pass.
FA2 = "specs/flash_attention_2.yaml"
FA2_BACKWARD = frozenset(
    {
        "example:two_equal_keys",
        "example:one_key",
        "example:huge_scores",
        "example:scale_in_every_gradient",
        "property:logsumexp_matches_golden",
        "property:gradients_match_golden",
    }
)


@dataclass(frozen=True)
class SpecAttack:
    """What one attack graded against its own spec must get.

    Attributes:
        spec: the spec file, relative to the repository.
        most: the points its right values earn: it may get no more (and, with ``exact``, no less).
        exact: the score must be ``most``.
        lost: the ids of exactly the cases it must fail, or None when that depends on drawn inputs.
        says: a text some failing case's message must hold (naming the input, the call, the count...).
        verdicts: the verdicts its failing cases may have (empty: any).
    """

    spec: str
    most: int
    exact: bool = True
    lost: frozenset[str] | None = None
    says: str = ""
    verdicts: frozenset[str] = frozenset()


SPEC_ATTACKS: dict[str, SpecAttack] = {
    # Mutation in a backward call, judged by the grader from the shared memory (inputs and dO) or,
    # for metadata, by the worker: every case with a backward pass lost, the backward rule unearned.
    "backward/backward_mutates_saved_inputs": SpecAttack(
        FA2,
        11,
        True,
        FA2_BACKWARD | {"rule:hand_written_backward"},
        "changed its input(s) Q, V in place (during its backward pass)",
    ),
    "backward/mutates_inputs_when_grad": SpecAttack(
        FA2, 11, True, FA2_BACKWARD | {"rule:hand_written_backward"}, "changed its input(s) K, V in place"
    ),
    "backward/backward_mutates_upstream": SpecAttack(
        FA2,
        11,
        True,
        FA2_BACKWARD | {"rule:hand_written_backward"},
        "changed its input(s) dO in place (during its backward pass)",
    ),
    "backward/backward_transposes_saved_key": SpecAttack(
        FA2, 11, True, FA2_BACKWARD | {"rule:hand_written_backward"}, "changed its input(s) K in place"
    ),
    # Aliasing judged from the grader's canaries in the output read again: S handed back when
    # nothing is masked costs output_not_aliased (and any case whose drawn mask keeps everything).
    "aliasing/lying_storage_subclass": SpecAttack(
        "specs/masked_scores.yaml", 13, False, None, "your output shares memory with the input(s) S"
    ),
    "aliasing/torch_function_mode_hides_storage": SpecAttack(
        "specs/masked_scores.yaml", 13, False, None, "your output shares memory with the input(s) S"
    ),
    # Its own reply written before the grader's canaries (a copy of the right values, "nothing
    # aliased"): the worker never sends a result then, so that call is a crash.
    "aliasing/forges_result_before_canaries": SpecAttack(
        "specs/masked_scores.yaml", 13, False, None, "sent a result before the grader had read the call's inputs"
    ),
    # Null implementations: no point anywhere.
    "aliasing/returns_input": SpecAttack("specs/masked_scores.yaml", 0, says="shares memory with the input(s) S"),
    "null/zero_times_sum": SpecAttack("tests/hostile/specs/attention_backward.yaml", 0),
    "null/null_function": SpecAttack(FA2, 0),
    "null/returns_query": SpecAttack(FA2, 0),
    # Long descriptions cut where the worker makes them: only the cases that read L are lost.
    "messages/saves_300_tensors": SpecAttack(
        FA2,
        16,
        True,
        FA2_BACKWARD - {"property:gradients_match_golden"},
        "found 301 among the 305 saved tensors' shapes: (1, 1, 1) ×2",
    ),
    "messages/many_functions_none_named": SpecAttack(
        "specs/dot_product_scores.yaml",
        0,
        True,
        None,
        "your file has no function named 'scores'; it defines: helper, helper_0,",
        frozenset({"function_missing"}),
    ),
    # Assignment rules: right values, SDPA in the forward and autograd in the backward.
    "rules/sdpa_forward_autograd_backward": SpecAttack(
        FA2,
        26,
        True,
        frozenset({"rule:no_sdpa", "rule:hand_written_backward"}),
        "your code calls torch.nn.functional.scaled_dot_product_attention",
        frozenset({"rule_broken"}),
    ),
}
"""Every attack of tests/hostile/{backward,aliasing,null,messages,rules}/ and what it must get."""

SPEC_ATTACK_FOLDERS = ("backward", "aliasing", "null", "messages", "rules")
