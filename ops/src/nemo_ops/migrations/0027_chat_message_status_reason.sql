-- Why a chat message did not complete: the gateway records a reply its chat screen stopped, or
-- one that broke off, as what the learner saw (status 'partial', 'failed' or 'cancelled') with the
-- reason as an upper-case code (GUARDRAIL_REJECTED, PROVIDER_STREAM_BROKEN...). A completed
-- message has none. The context role writes it with the table's existing grants.
ALTER TABLE learning.chat_messages
    ADD COLUMN status_reason text
        CHECK (status_reason ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    ADD CONSTRAINT chat_messages_completed_without_reason
        CHECK (status <> 'completed' OR status_reason IS NULL);
