"""The proposals' write side, one entry per use; every change of a proposal is recorded one way
(services.record: its audit record in the change's transaction, then the live queue pages told and, once
approved, its executor started).

- intake: a box's submission and what it may see of its proposals (through the gateway)
- deciding: a person's decision, an earned-trust rule's, a retry, expiry
- executing: claiming, performing and finishing an approved proposal (the Celery task's side)
- configuring: destinations and earned-trust rules (admin, CLI, files)"""

from controlplane.proposals.services.configuring import (
    DESTINATION_FILES,
    destination_delete,
    destination_save,
    trust_rule_delete,
    trust_rule_save,
)
from controlplane.proposals.services.deciding import (
    DECIDE_PERMISSION,
    MAX_REASON,
    ProposalClosed,
    approve_by_rule,
    proposal_decide,
    proposal_expire,
    proposal_expire_due,
    proposal_retry,
)
from controlplane.proposals.services.executing import execute_once
from controlplane.proposals.services.intake import proposal_status_for_box, proposal_submit

__all__ = [
    "DECIDE_PERMISSION", "DESTINATION_FILES", "MAX_REASON", "ProposalClosed", "approve_by_rule",
    "destination_delete", "destination_save", "execute_once", "proposal_decide", "proposal_expire",
    "proposal_expire_due", "proposal_retry", "proposal_status_for_box", "proposal_submit",
    "trust_rule_delete", "trust_rule_save",
]
