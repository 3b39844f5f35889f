"""Redis: the Celery broker and the channel layer (live pages, the approval announcements)."""

from controlplane.core.env import env
from controlplane.settings.audit import ROSTER_AUDIT_CHECKPOINT_SECONDS

REDIS_URL = env.str("REDIS_URL", "redis://127.0.0.1:6379/0")
# A receiver waits on Redis in blocking pops of 5 s (channels_redis); redis-py's default read timeout is
# also 5 s, so an idle receiver (a queue page's websocket, the decision API's approval listener) failed
# with a read timeout every few seconds and reconnected. Reads may take this long instead.
ROSTER_CHANNELS_REDIS_READ_TIMEOUT_SECONDS = env.float("ROSTER_CHANNELS_REDIS_READ_TIMEOUT_SECONDS", 10.0,
                                                       minimum=0)
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": env.str("ROSTER_CHANNELS_REDIS_URL", REDIS_URL),
                              "socket_timeout": ROSTER_CHANNELS_REDIS_READ_TIMEOUT_SECONDS}]},
    }
}
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Tasks run in the caller's process (tests and one-shot commands only, never the stack).
CELERY_TASK_ALWAYS_EAGER = env.bool("ROSTER_CELERY_EAGER", False)
CELERY_BEAT_SCHEDULE = {
    "expire-approvals": {"task": "controlplane.approvals.tasks.expire_approvals", "schedule": 5.0},
    "reap-runs": {"task": "controlplane.dispatch.tasks.reap_runs", "schedule": 15.0},
    "expire-proposals": {"task": "controlplane.proposals.tasks.expire_proposals", "schedule": 30.0},
    "settle-overdue-reservations": {"task": "controlplane.ledger.tasks.settle_overdue_reservations",
                                    "schedule": 60.0},
    "purge-expired-notes": {"task": "controlplane.memory.tasks.purge_expired_notes", "schedule": 3600.0},
    "purge-expired-journal": {"task": "controlplane.journal.tasks.purge_expired_journal", "schedule": 3600.0},
    "audit-checkpoint": {"task": "controlplane.audit.tasks.checkpoint",
                         "schedule": ROSTER_AUDIT_CHECKPOINT_SECONDS},
}
