"""One module per contract family (:class:`~attnscore.maths.family.ContractFamily`), each carrying
everything about its family; the registry (:mod:`attnscore.maths.families.registry`) maps a member
to its module, which satisfies :class:`attnscore.maths.families.base.Family`."""
