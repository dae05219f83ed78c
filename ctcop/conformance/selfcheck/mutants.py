"""The mutants of the self-check: each is one rule of the spec broken, as a real CTC implementation
has broken it or as the rule invites. :class:`.plain.Plain` computes each one.

``rule`` is the numbered rule of spec/ctcloss4.md it breaks; ``seen`` names, where there is one,
an implementation known to have the bug (a registry id: ``ctcop defects``); ``varies`` marks a
mutant whose catching cases change from run to run (a random one of each batch's losses differs).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    rule: str
    what: str
    seen: str = ""
    varies: bool = False


MUTANTS: dict[str, Mutant] = {
    # 3.1, 3.2: the mask and the frame counts
    "mask_values": Mutant("3.1", "a mask value other than 0 and 1 read as a 1"),
    "mask_gaps": Mutant("3.1", "a mask with a gap read as its count of 1s"),
    "masked_frames_computed": Mutant("3.2", "every sample computed over all T frames, its mask ignored"),
    "masked_frames_read": Mutant("3.2", "NaN or inf in an inactive frame poisons the sample", "D22, D29, D40"),
    "lengths_of_the_first_sample": Mutant("3.2", "every sample given the frame count of sample 0"),
    "no_frames_refused": Mutant("3.2", "a sample with no active frame (T_i = 0) refused"),
    # 3.3, 3.4: labels and targets
    "label_is_blank": Mutant("3.3", "a label equal to the blank accepted", "D24"),
    "label_at_least_c": Mutant("3.3", "a label >= C accepted (read modulo C)", "D24"),
    "label_below_pad": Mutant("3.3", "a label below -1 accepted (read as a pad)"),
    "labels_beyond_frames_unchecked": Mutant("3.3", "labels past a sample's frame count not checked"),
    "trailing_pads_only": Mutant("3.3", "the target read up to its first pad, interior pads ending it"),
    "collapse_ignored": Mutant("3.4, 7.3", "preprocess_collapse_repeated ignored"),
    "collapse_before_pads": Mutant("3.4", "repeats collapsed before the pads are removed"),
    # 4.1: the softmax
    "softmax_without_the_last_class": Mutant("4.1", "the softmax's sum over C - 1 classes"),
    "softmax_one_term_too_many": Mutant("4.1", "the softmax's sum over C + 1 terms (the seed's bound read literally)"),
    "softmax_without_shift": Mutant("4.1", "exp of the raw logits: overflow at large logits", "D35"),
    "softmax_in_float32": Mutant("4.1, 6", "the log-softmax computed in float32", "D33"),
    # 4.2, 4.5: decoding and the lattice
    "merge_always": Mutant("4.2", "merge_repeated false read as true"),
    "merge_never": Mutant("4.2", "merge_repeated true read as false"),
    "skip_between_repeats": Mutant("4.5", "a skip between two equal labels allowed under merging"),
    "final_blank_only": Mutant("4.5", "a path must end on the trailing blank, not on the last label"),
    # 4.3: the loss
    "loss_is_the_log_likelihood": Mutant("4.3", "ln sum p(S) returned instead of its negative"),
    # 4.4: edge cases
    "infeasible_zero": Mutant("4.4", "no aligned path gives 0 instead of +inf", "D44"),
    "infeasible_finite": Mutant("4.4", "no aligned path gives a finite loss (ln 0 stood in by ln 1e-307)", "D27, D39"),
    "empty_target_zero": Mutant("4.4", "an empty target gives 0 instead of the all-blank path"),
    "empty_batch_refused": Mutant("4.4", "N = 0 or T = 0 refused", "D23, D32, D41, D47"),
    "nan_as_zero_probability": Mutant("4.4", "NaN in an active frame read as probability 0"),
    "neg_inf_as_zero_probability": Mutant("4.4", "-inf in an active frame read as probability 0"),
    "pos_inf_as_certain": Mutant("4.4", "+inf in an active frame read as a certain class"),
    "nan_poisons_the_batch": Mutant("4.4", "a NaN sample makes every sample of the batch NaN"),
    # 5: the gradient
    "infeasible_gradient_nan": Mutant("5", "an infeasible sample's gradient NaN instead of 0", "D21"),
    "infeasible_gradient_softmax": Mutant("5", "an infeasible sample's gradient the softmax instead of 0", "D34"),
    "gradient_sign": Mutant("5", "the gradient's sign flipped (occupancy - softmax)"),
    "inactive_frames_gradient": Mutant("3.2, 5", "the gradient in inactive frames the softmax instead of 0"),
    "nan_gradient_everywhere": Mutant("5", "a NaN sample's gradient NaN in its inactive frames too", "D29, D40"),
    # 6: element types and validity
    "element_types": Mutant("6", "inputs of a type outside the spec's accepted and cast"),
    "shapes": Mutant("2, 6", "inputs of the wrong shape accepted (cut or padded)"),
    "zero_classes": Mutant("6", "C = 0 accepted, every loss 0"),
    "overflow_saturates": Mutant("6", "a loss beyond the type's range saturated to its largest value"),
    "nondeterministic": Mutant("11.5", "a loss's low bits differ from run to run", "D24, D45", varies=True),
    # 7: the released form
    "blank_index_ignored": Mutant("7", "blank_index ignored, the blank always C - 1"),
    "default_blank_is_zero": Mutant("7", "without blank_index the blank is class 0"),
    "blank_index_unchecked": Mutant("7.1", "blank_index outside [0, C - 1] accepted (read modulo C)"),
    "lengths_unchecked": Mutant("7.1", "logit_length or label_length outside [0, T] accepted (clipped)"),
    "prefix_labels_unchecked": Mutant("7.2", "a prefix label that is the blank, negative or >= C accepted", "D11"),
    "junk_after_length_checked": Mutant("7.2", "entries past label_length checked, a valid batch refused"),
    "label_length_ignored": Mutant("7.2", "label_length ignored, the whole row read as the target"),
    "unique_ignored": Mutant("7.3", "unique ignored"),
    "unique_keeps_last": Mutant("7.3", "unique keeps the last occurrence of each class"),
}
