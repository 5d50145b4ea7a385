"""Stripe invoices: import an export, and apply payment webhooks exactly once per event.

Import (``oncebeat import --stripe invoices.json``): :func:`read_stripe_invoices`
reads Stripe ``invoice`` objects — an API list response (``{"object": "list",
"data": [...]}``), a JSON array, one object, or JSON lines — into the same
:class:`~oncebeat.reminders.importing.InvoiceImport` the CSV reader returns, so the
same rules apply (legal-tender currency, amount > 0, dates in range, one
customer per email). Stripe's shapes are converted:

- ``currency`` is lower case (``"usd"``); ``amount_due`` is in Stripe's minor
  units: none for its zero-decimal currencies (JPY, KRW, …), three decimals for
  BHD, JOD, KWD, OMR, TND, two for every other. Stripe's special cases keep two
  decimals in the API: ISK (ISO 4217: no minor unit; Stripe's ``500`` ISK is
  5 ISK, and a fraction of a krona is refused), HUF and TWD (ISO 4217: two, so
  Stripe's ``849150`` HUF is HUF 8,491.50, stored as 849150; Stripe pays these
  out in whole units only, which does not change what an invoice owes). UGX is
  on Stripe's zero-decimal list and has no minor unit in ISO 4217 either.
  Amounts are rescaled to the currency's ISO 4217 minor unit
  (:mod:`oncebeat.reminders.money`, never CLDR's display digits); one that does
  not fit is refused.
- ``created``, ``due_date``, ``status_transitions.*_at`` are Unix seconds,
  turned into dates in the business zone ``tz``.
- ``customer_address.country`` is the customer's country (ISO 3166-1 alpha-2) and, when the export expands
  ``customer``, its ``metadata.oncebeat_tags`` (``"enterprise;vip"``) its tags; an invoice without them keeps
  the stored ones. ``[[ladders]]`` match both (``country``, ``tags_any``).
- ``status``: ``draft`` invoices (nothing owed yet) and invoices with nothing
  due are left out and counted; ``open``, ``paid`` (``paid_on`` from
  ``status_transitions.paid_at``), ``void``, ``uncollectible`` map as they are.
  The status's own transition time becomes ``status_on``. Statuses move under the
  transition rule every source shares (:mod:`oncebeat.reminders.records`): an
  invoice paid here stays paid whatever Stripe later marks it, unless ``--reopen``.

Webhooks (:class:`StripeWebhooks`): ``invoice.finalized``, ``invoice.paid``,
``invoice.voided``, ``invoice.marked_uncollectible``, ``charge.dispute.created`` (a dispute hold on the
invoice the dispute names, :func:`dispute_invoice_number`) and ``charge.dispute.closed`` (its release) are
verified with the official ``stripe`` package (``Stripe-Signature`` header, ``STRIPE_WEBHOOK_SECRET``)
and applied in one transaction with a row in ``stripe_events`` keyed by the
event id (``INSERT … ON CONFLICT DO NOTHING``): a replayed event changes nothing.
Reordered events cannot move an invoice backwards: a status moves only under the
transition rule every source shares (:mod:`oncebeat.reminders.records`: open →
paid | void | uncollectible, uncollectible → paid | void; a payment recorded
here, by a payments import too, is undone only by an explicit reopen); anything
else is recorded ``stale``. The customer is written under the same merge rule as
an import's: Stripe carries no zone or language, so a known customer keeps them. A forged or tampered event
raises :class:`WebhookRejected` before anything is read or written.

Every verified event refreshes the ``stripe`` payment-freshness watermark (:mod:`.capfence`), and
``payment_intent.processing`` makes the invoice's reminders wait until ``succeeded``, ``payment_failed`` or
``canceled`` (a bank debit takes days; reminding meanwhile asks for money already on its way).

Example::

    hooks = StripeWebhooks(store, clock=SystemClock(), secret=os.environ["STRIPE_WEBHOOK_SECRET"], tz="UTC")
    outcome = hooks.handle(request_body, request.headers["Stripe-Signature"])  # raises WebhookRejected
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from ..errors import ConfigError, ImportRejected, OncebeatError
from ..provenance import current_source
from ..store import Store, Tx
from ..timebase import Clock
from .calendar import BusinessCalendar
from .capfence import mark_processing, set_payment_source, touch_watermark
from .conversions import currency_reason, date_range_reason, length_reason, text_reason
from .holds import HoldError, place_hold, release_holds
from .model import INVOICE_STATUSES, Customer, Invoice
from .money import minor_digits
from .records import move_status, write_customers
from .segments import check_country, check_tags
from .sources.invoices import InvoiceImport
from .sources.problems import RowProblem
from .sources.values import check_payment_url
from .sources.values import email_reason as _check_email

#: The key of a Stripe customer's metadata holding its oncebeat tags (``"enterprise;vip"``).
STRIPE_TAGS_KEY = "oncebeat_tags"

__all__ = [
    "HANDLED_EVENTS",
    "StripeImport",
    "StripeWebhooks",
    "WebhookOutcome",
    "WebhookRejected",
    "read_stripe_invoices",
    "stripe_minor_to_iso",
]

#: Stripe's zero-decimal currencies (https://docs.stripe.com/currencies#zero-decimal). Every other currency has
#: two decimals in Stripe's API, ISK, HUF and TWD included (its "special cases": whole units for some operations,
#: but amounts are still written x100).
STRIPE_ZERO_DECIMAL = frozenset("BIF CLP DJF GNF JPY KMF KRW MGA PYG RWF UGX VND VUV XAF XOF XPF".split())
#: Stripe's three-decimal currencies (https://docs.stripe.com/currencies#three-decimal).
STRIPE_THREE_DECIMAL = frozenset("BHD JOD KWD OMR TND".split())
#: A payment of an invoice is processing (a bank debit takes days): its reminders wait (oncebeat.reminders.capfence)
#: until it succeeds (invoice.paid: skipped) or ends otherwise (they go out). Keyed by the payment intent's invoice
#: number (metadata.invoice_number, or an expanded invoice.number).
PROCESSING_EVENTS = ("payment_intent.processing", "payment_intent.succeeded", "payment_intent.payment_failed",
                     "payment_intent.canceled")
#: Webhook event types that change an invoice; others are recorded and ignored.
HANDLED_EVENTS = ("invoice.finalized", "invoice.paid", "invoice.voided", "invoice.marked_uncollectible",
                  "charge.dispute.created", "charge.dispute.closed", *PROCESSING_EVENTS)
#: Dispute events: a dispute hold (oncebeat.reminders.holds) placed or released, keyed by the dispute's id.
DISPUTE_EVENTS = ("charge.dispute.created", "charge.dispute.closed")
#: Seconds a signed webhook stays valid (Stripe's default tolerance): older replays are refused.
SIGNATURE_TOLERANCE = 300

_EVENT_STATUS = {"invoice.finalized": "open", "invoice.paid": "paid", "invoice.voided": "void",
                 "invoice.marked_uncollectible": "uncollectible"}
_TRANSITION_FIELD = {"open": "finalized_at", "paid": "paid_at", "void": "voided_at",
                     "uncollectible": "marked_uncollectible_at"}


class WebhookRejected(OncebeatError):
    """A webhook request failed verification (bad signature, too old, not JSON): nothing was read or changed."""


def stripe_minor_to_iso(amount: int, currency: str) -> tuple[int | None, str | None]:
    """Stripe's minor units of ``currency`` (upper case) → ISO 4217 minor units, or (None, reason).

    (849150, "HUF") → (849150, None); (50000, "ISK") → (500, None); (5000, "JPY") → (5000, None);
    (50050, "ISK") → (None, "… a fraction of the smallest ISK unit").
    """
    stripe_exponent = 0 if currency in STRIPE_ZERO_DECIMAL else 3 if currency in STRIPE_THREE_DECIMAL else 2
    shift = minor_digits(currency) - stripe_exponent
    if shift >= 0:
        return amount * 10**shift, None
    if amount % 10**-shift:
        return None, (f"is {amount} in Stripe's units ({stripe_exponent} decimals), which has a fraction of the "
                      f"smallest {currency} unit")
    return amount // 10**-shift, None


# --------------------------------------------------------------------------- import


@dataclass(frozen=True, kw_only=True, slots=True)
class StripeImport:
    """What :func:`read_stripe_invoices` found: the import plus what was left out on purpose."""

    data: InvoiceImport
    drafts: int  # draft invoices: nothing is owed yet
    nothing_due: int  # finalized invoices with amount_due 0 (a free trial, a 100 % coupon)


def _objects(path: Path, source: str) -> Iterator[tuple[int, Any]]:
    """(line or position, JSON value) for each invoice object in an API list, array, object or JSON lines."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportRejected(f"{source}: cannot read the file ({exc})", [f"{source}:1: cannot read the file"]) from None
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if whole is None:  # JSON lines: one object per line
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, exc
        return
    items = whole.get("data") if isinstance(whole, dict) and whole.get("object") == "list" else whole
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        yield 1, ValueError("is neither a Stripe list response, an array of invoices, nor JSON lines")
        return
    yield from enumerate(items, start=1)


def _day(seconds: Any, zone: ZoneInfo) -> date | None:
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).astimezone(zone).date()
    except (OverflowError, OSError, ValueError):
        return None


def invoice_from_stripe(obj: Mapping[str, Any], *, tz: str, due_days: int | None = None
                        ) -> tuple[Customer | None, Invoice | None, list[tuple[str, Any, str]]]:
    """Convert one Stripe invoice object: (customer, invoice, problems as (field, value, reason)).

    A draft or an invoice with nothing due gives (None, None, []) — left out, not a problem.
    """
    zone = ZoneInfo(tz)
    problems: list[tuple[str, Any, str]] = []
    if obj.get("object") not in (None, "invoice"):
        return None, None, [("object", obj.get("object"), "is not a Stripe invoice")]
    status = obj.get("status")
    if status == "draft":
        return None, None, []
    if status not in INVOICE_STATUSES:
        problems.append(("status", status, "is not a Stripe invoice status (open, paid, void, uncollectible)"))
    texts: dict[str, str] = {}
    for name, ours in (("number", "invoice_number"), ("customer_email", "customer_email"),
                       ("customer_name", "customer_name")):
        value = obj.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        bad = "is not text" if not isinstance(value, str) else (
            text_reason(value.strip(), allow_joiners=ours == "customer_name") or length_reason(ours, value.strip()))
        if bad:  # a value too long to show is named by its length only
            problems.append((name, None if isinstance(value, str) and length_reason(ours, value.strip()) else value,
                             bad))
            continue
        texts[name] = " ".join(value.split())
    if "number" not in texts:
        problems.append(("number", None, "is empty (only finalized invoices have a number)"))
    email = texts.get("customer_email", "")
    if not email:
        problems.append(("customer_email", None, "is empty: set the customer's email in Stripe"))
    elif email_reason := _check_email(email):
        problems.append(("customer_email", email, email_reason))
    currency = str(obj.get("currency") or "").upper()
    if reason := currency_reason(currency):
        problems.append(("currency", obj.get("currency"), reason))
    amount = obj.get("amount_due")
    minor: int | None = None
    if isinstance(amount, bool) or not isinstance(amount, int):
        problems.append(("amount_due", amount, "is not a whole number of minor units"))
    elif amount <= 0:
        if amount == 0:
            return None, None, []
        problems.append(("amount_due", amount, "is negative"))
    elif not currency_reason(currency):
        minor, reason = stripe_minor_to_iso(amount, currency)
        if reason:
            problems.append(("amount_due", amount, reason))
    issued = _day(obj.get("created"), zone)
    if issued is None or date_range_reason(issued):
        problems.append(("created", obj.get("created"), "is not a Unix time in the supported range"))
    due = _day(obj.get("due_date"), zone)
    if obj.get("due_date") is None and due_days is not None and issued is not None:
        due = issued + timedelta(days=due_days)
    if due is None or date_range_reason(due):
        problems.append(("due_date", obj.get("due_date"),
                         "is empty (charged automatically?): pass --due-days N" if obj.get("due_date") is None
                         else "is not a Unix time in the supported range"))
    elif issued is not None and due < issued:
        problems.append(("due_date", obj.get("due_date"), f"is before the invoice was created ({issued})"))
    transitions = obj.get("status_transitions") or {}
    status_on = _day(transitions.get(_TRANSITION_FIELD.get(str(status), "")), zone)
    paid_on = status_on if status == "paid" else None
    if status == "paid" and paid_on is None:
        problems.append(("status_transitions.paid_at", transitions.get("paid_at"), "is empty, but status is paid"))
    # Stripe's hosted invoice page is the pay-now link; an invoice without one (a draft, paid out of band) keeps
    # whatever link was stored (None: not carried).
    hosted = obj.get("hosted_invoice_url")
    payment_url: str | None = None
    if isinstance(hosted, str) and hosted:
        payment_url, url_reason = check_payment_url(hosted)
        if url_reason:
            problems.append(("hosted_invoice_url", hosted, url_reason))
    country, tags = _country_and_tags(obj, problems)
    if problems:
        return None, None, problems
    assert issued is not None and due is not None and minor is not None
    # A Stripe invoice carries no zone or language (and maybe no name, address or tags): a known customer keeps its
    # own (records).
    customer = Customer(email=email.lower(), name=texts.get("customer_name"), country=country, tags=tags)
    invoice = Invoice(number=texts["number"], customer_email=customer.email, currency=currency, amount_due=minor,
                      issued_on=issued, due_on=due, status=str(status), paid_on=paid_on,
                      status_on=status_on if status != "open" else None, payment_url=payment_url)
    return customer, invoice, []


def _country_and_tags(obj: Mapping[str, Any], problems: list[tuple[str, Any, str]]) -> tuple[str | None, str | None]:
    """The customer's country (``customer_address.country``, the address Stripe copied onto the invoice) and tags
    (``customer.metadata.oncebeat_tags``, ``"a;b"``, when the export expands ``customer``); None for what the
    invoice does not carry (the stored value is kept)."""
    country: str | None = None
    address = obj.get("customer_address")
    raw_country = address.get("country") if isinstance(address, dict) else None
    if isinstance(raw_country, str) and raw_country.strip():
        country, reason = check_country(raw_country)
        if reason:
            problems.append(("customer_address.country", raw_country, reason))
    tags: str | None = None
    customer = obj.get("customer")
    metadata = customer.get("metadata") if isinstance(customer, dict) else None
    raw_tags = metadata.get(STRIPE_TAGS_KEY) if isinstance(metadata, dict) else None
    if raw_tags is not None:
        tags, reason = check_tags(raw_tags) if isinstance(raw_tags, str) else (None, "is not text")
        if reason:
            problems.append((f"customer.metadata.{STRIPE_TAGS_KEY}", raw_tags, reason))
    return country, tags


def read_stripe_invoices(path: Path, *, tz: str, due_days: int | None = None,
                         source_name: str | None = None) -> StripeImport:
    """Read a Stripe invoice export (see the module docstring); never raises for a bad invoice.

    Args:
        tz: the business zone: Unix times become dates there.
        due_days: due date = created + N days for invoices without ``due_date`` (charged automatically).
    Raises:
        ImportRejected: the file cannot be read at all.
    """
    path = Path(path)
    source = source_name if source_name is not None else path.name
    problems: list[RowProblem] = []
    customers: dict[str, Customer] = {}
    invoices: dict[str, tuple[int, Invoice]] = {}
    rejected: list[tuple[int, dict[str, str]]] = []
    drafts = nothing_due = rows = 0
    for where, obj in _objects(path, source):
        rows += 1
        if isinstance(obj, Exception) or not isinstance(obj, dict):
            reason = f"is not a JSON object ({obj})" if isinstance(obj, Exception) else "is not a JSON object"
            problems.append(RowProblem(line=where, column=None, value=None, reason=reason, source=source))
            rejected.append((where, {"object": str(obj)[:200]}))
            continue
        customer, invoice, found = invoice_from_stripe(obj, tz=tz, due_days=due_days)
        if invoice is not None and invoice.number in invoices:
            found = [("number", invoice.number, f"is a duplicate of invoice {invoices[invoice.number][0]}")]
        if found:
            problems.extend(RowProblem(line=where, column=name, value=None if value is None else str(value),
                                       reason=reason, source=source) for name, value, reason in found)
            rejected.append((where, {k: json.dumps(v) if not isinstance(v, str) else v for k, v in obj.items()
                                     if k in ("id", "number", "customer_email", "status", "currency", "amount_due")}))
            continue
        if invoice is None:
            drafts += obj.get("status") == "draft"
            nothing_due += obj.get("status") != "draft"
            continue
        assert customer is not None
        known = customers.get(customer.email)
        if known is None or (known.name is None and customer.name is not None):
            customers[customer.email] = customer
        invoices[invoice.number] = (where, invoice)
    data = InvoiceImport(customers=list(customers.values()), invoices=[i for _, i in invoices.values()],
                         problems=sorted(problems, key=lambda p: p.line), rejected_lines=rejected, rows_read=rows,
                         header=["id", "number", "customer_email", "status", "currency", "amount_due"], source=source)
    return StripeImport(data=data, drafts=drafts, nothing_due=nothing_due)


# --------------------------------------------------------------------------- webhooks


@dataclass(frozen=True, kw_only=True, slots=True)
class WebhookOutcome:
    """What one verified event did: ``applied``, ``duplicate`` (event id seen before), ``stale`` (a transition
    Stripe's order does not allow from the invoice's current status: a late or reordered event), ``ignored``
    (an event type or object oncebeat does not act on) or ``invalid`` (the invoice object could not be used)."""

    event_id: str
    event_type: str
    outcome: str
    invoice: str | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"event": self.event_id, "type": self.event_type, "outcome": self.outcome, "invoice": self.invoice,
                "detail": self.detail}


def _event_shape(data: Any) -> dict[str, Any]:
    """``data`` if it has an event's shape (an object with text ``id`` and ``type`` and an object ``data.object``).

    Raises:
        WebhookRejected: naming the first field of the wrong shape.
    """
    if not isinstance(data, dict):
        raise WebhookRejected(f"the body is JSON but not an event: a {type(data).__name__}, not an object")
    if not isinstance(data.get("id"), str) or not isinstance(data.get("type"), str):
        raise WebhookRejected("the event has no id or type")
    for name in ("id", "type"):
        value = data[name]
        if not 0 < len(value) <= 255 or not value.isprintable():
            raise WebhookRejected(f"the event's {name} is not 1 to 255 printable characters")
    created = data.get("created")
    if created is not None and (isinstance(created, bool) or not isinstance(created, int)
                                or not 0 <= created < 2**53):
        raise WebhookRejected("the event's created is not a Unix time in seconds")
    if not isinstance(data.get("data"), dict) or not isinstance(data["data"].get("object"), dict):
        raise WebhookRejected("the event's data.object is not an object")
    return data


class StripeWebhooks:
    """Verify and apply Stripe invoice events on ``store``; ``tz`` is the business zone for dates, ``calendar`` the
    policy's business calendar (a closed dispute resumes the ladder on its next business day)."""

    def __init__(self, store: Store, *, clock: Clock, secret: str | None, tz: str,
                 calendar: BusinessCalendar | None = None) -> None:
        if not secret:
            raise ConfigError("STRIPE_WEBHOOK_SECRET is not set: copy the signing secret (whsec_…) of the endpoint "
                              "from the Stripe dashboard into it")
        self.store = store
        self.clock = clock
        self.secret = secret
        self.tz = tz
        self.calendar = calendar

    def verify(self, payload: bytes, signature: str | None) -> dict[str, Any]:
        """The event in ``payload`` if ``signature`` (the ``Stripe-Signature`` header) proves Stripe sent it.

        Raises:
            WebhookRejected: no or a wrong signature, a timestamp older than 5 minutes, or not a JSON event
                (not JSON, nested too deeply, or another shape than an object with ``id``, ``type`` and
                ``data.object``).
        """
        import stripe  # here: ~0.1 s of import (its HTTP clients) that an import of a Stripe export never needs

        if not signature:
            raise WebhookRejected("no Stripe-Signature header")
        try:
            stripe.WebhookSignature.verify_header(payload, signature, self.secret, tolerance=SIGNATURE_TOLERANCE)
        except stripe.SignatureVerificationError as exc:
            raise WebhookRejected(f"signature check failed: {exc.user_message or exc}") from None
        except ValueError as exc:  # not UTF-8
            raise WebhookRejected(f"the body is not a JSON event: {exc}") from None
        try:
            data = json.loads(payload)
        except ValueError as exc:
            raise WebhookRejected(f"the body is not a JSON event: {exc}") from None
        except RecursionError:
            raise WebhookRejected("the body is not a JSON event: nested too deeply") from None
        return _event_shape(data)

    def handle(self, payload: bytes, signature: str | None) -> WebhookOutcome:
        """Verify then apply (see :meth:`verify` and :meth:`apply`)."""
        return self.apply(self.verify(payload, signature))

    def apply(self, event: Mapping[str, Any]) -> WebhookOutcome:
        """Apply one verified event exactly once (one transaction with its ``stripe_events`` row)."""
        event_id, kind = str(event["id"]), str(event["type"])
        obj = (event.get("data") or {}).get("object") or {}
        number = obj.get("number") if isinstance(obj, dict) and isinstance(obj.get("number"), str) else None
        if number is not None and not (0 < len(number) <= 255 and number.isprintable()):
            number = None  # recorded without a number (and refused as invalid below), never a database error
        now = self.clock.now()
        with self.store.transaction() as tx:
            claimed = tx.run("stripe_event_claim", id=event_id, type=kind, invoice_number=number,
                             created=event.get("created") if isinstance(event.get("created"), int) else None,
                             now=now)
            if not claimed:
                return WebhookOutcome(event_id=event_id, event_type=kind, outcome="duplicate", invoice=number,
                                      detail="this event id was received before; nothing changed")
            outcome = self._apply(tx, kind, obj, event_id, now)
            # Any verified event is Stripe's data arriving: the payment-freshness fence's watermark (capfence).
            touch_watermark(tx, "stripe", now=now, detail=f"webhook {kind}"[:500])
            tx.run("stripe_event_finish", id=event_id, outcome=outcome.outcome, detail=outcome.detail)
        return outcome

    def _apply(self, tx: Tx, kind: str, obj: Any, event_id: str, now: datetime) -> WebhookOutcome:
        def out(outcome: str, detail: str, number: str | None = None) -> WebhookOutcome:
            return WebhookOutcome(event_id=event_id, event_type=kind, outcome=outcome, invoice=number, detail=detail)

        if kind in DISPUTE_EVENTS:
            return self._dispute(tx, kind, obj, out)
        if kind in PROCESSING_EVENTS:
            return self._processing(tx, kind, obj, now, out)
        if kind not in _EVENT_STATUS:
            return out("ignored", f"oncebeat does not act on {kind}")
        if not isinstance(obj, dict) or obj.get("object") != "invoice":
            return out("invalid", "the event carries no invoice object")
        customer, invoice, problems = invoice_from_stripe(obj, tz=self.tz)
        target = _EVENT_STATUS[kind]
        if invoice is None or customer is None:
            detail = "; ".join(f"{f}: {r}" for f, _, r in problems) or "a draft, or nothing due"
            return out("invalid" if problems else "ignored", detail, obj.get("number"))
        # The event names the transition; the object's own status may already be later (Stripe sends a snapshot).
        if invoice.status != target:
            transitions = obj.get("status_transitions") or {}
            day = _day(transitions.get(_TRANSITION_FIELD[target]), ZoneInfo(self.tz))
            paid_on = (day or invoice.status_on) if target == "paid" else None
            invoice = Invoice(number=invoice.number, customer_email=invoice.customer_email, currency=invoice.currency,
                              amount_due=invoice.amount_due, issued_on=invoice.issued_on, due_on=invoice.due_on,
                              status=target, paid_on=paid_on if target == "paid" else None, status_on=day,
                              payment_url=invoice.payment_url)
            if target == "paid" and invoice.paid_on is None:
                return out("invalid", "invoice.paid without status_transitions.paid_at", invoice.number)
        write_customers(tx, [customer])
        # A new invoice's entered_at is stamped under the scan lock, as an import's (ReminderService.upsert).
        tx.run("scan_lock")
        now = self.clock.now()
        inserted = tx.run("insert_invoice_if_absent", number=invoice.number, customer_email=customer.email,
                          currency=invoice.currency, amount_due=invoice.amount_due, issued_on=invoice.issued_on,
                          due_on=invoice.due_on, status=invoice.status, paid_on=invoice.paid_on,
                          paid_at=now if invoice.status == "paid" else None, now=now)
        if inserted:
            return out("applied", f"new invoice, {invoice.status}", invoice.number)
        # The one transition rule of every source (records.move_status); an event is never an explicit reopen.
        # An event that writes a known invoice makes Stripe its payment source (the last writer's, capfence).
        if move_status(tx, invoice.number, target, paid_on=invoice.paid_on, status_on=invoice.status_on, now=now):
            set_payment_source(tx, invoice.number, "stripe")
            return out("applied", f"now {target}", invoice.number)
        if target == "open":  # finalized: never reopens; refreshes an invoice that is still open
            if tx.run("refresh_open_invoice", number=invoice.number, amount_due=invoice.amount_due,
                      due_on=invoice.due_on, now=now):
                set_payment_source(tx, invoice.number, "stripe")
                return out("applied", "still open: amount and due date follow Stripe", invoice.number)
            return out("stale", "not reopened: the invoice is already paid, void or uncollectible (a late or "
                                "reordered event)", invoice.number)
        return out("stale", f"not moved to {target}: the invoice's current status does not allow it (a late or "
                            "reordered event)", invoice.number)

    def _processing(self, tx: Tx, kind: str, obj: Any, now: datetime,
                    out: Callable[..., WebhookOutcome]) -> WebhookOutcome:
        """``payment_intent.processing``: the invoice's reminders wait (not skipped: the payment may still fail);
        ``succeeded``, ``payment_failed``, ``canceled``: they no longer wait (a success also marks it paid through
        ``invoice.paid``)."""
        if not isinstance(obj, dict) or obj.get("object") != "payment_intent":
            return out("invalid", "the event carries no payment intent")
        number = _intent_invoice_number(obj)
        if number is None:
            return out("ignored", "the payment intent names no invoice number (metadata.invoice_number or an "
                                  "expanded invoice.number)")
        processing = kind == "payment_intent.processing"
        if not mark_processing(tx, number, now if processing else None):
            return out("ignored", f"no invoice {number!r}", number)
        return out("applied", "payment processing: reminders wait" if processing
                   else f"payment {kind.rsplit('.', 1)[1]}: reminders no longer wait", number)

    def _dispute(self, tx: Tx, kind: str, obj: Any, out: Callable[..., WebhookOutcome]) -> WebhookOutcome:
        """``charge.dispute.created``: a dispute hold on the invoice the dispute names; ``closed``: its release.

        The hold's ``external_ref`` is the dispute's id, so a second ``created`` for one dispute (another event id)
        places nothing more and ``closed`` releases exactly that hold.
        """
        if not isinstance(obj, dict) or obj.get("object") != "dispute" or not isinstance(obj.get("id"), str):
            return out("invalid", "the event carries no dispute object")
        dispute = str(obj["id"])[:255]
        zone = ZoneInfo(self.tz)
        source = current_source("api", name="stripe webhook")
        if kind == "charge.dispute.closed":
            try:
                released = release_holds(self.store, clock=self.clock, zone=zone, source=source,
                                         external_ref=dispute, note=f"Stripe dispute {dispute} closed: "
                                         f"{obj.get('status')}", by="stripe", tx=tx, calendar=self.calendar)
            except HoldError:  # no hold was placed for it (its created event named no invoice of ours): ignored
                released = []
            if not released:
                return out("ignored", f"no open hold for dispute {dispute}")
            return out("applied", f"hold {released[0].id} released (dispute {obj.get('status')})",
                       released[0].invoice)
        number = dispute_invoice_number(obj)
        if number is None:
            return out("ignored", "the dispute names no invoice number (metadata.invoice_number, or an expanded "
                                  "charge.invoice.number or charge.metadata.invoice_number)")
        try:
            hold = place_hold(self.store, clock=self.clock, zone=zone, source=source, reason="dispute",
                              invoice=number, note=f"Stripe dispute {dispute}: {obj.get('reason')}",
                              external_ref=dispute, by="stripe", tx=tx)
        except HoldError as exc:
            return out("ignored", str(exc), number)
        if hold is None:
            return out("duplicate", f"dispute {dispute} already has its hold", number)
        return out("applied", f"dispute hold {hold.id} placed", number)


def _intent_invoice_number(obj: Mapping[str, Any]) -> str | None:
    """The invoice number a payment intent names: ``metadata.invoice_number`` or an expanded ``invoice.number``."""
    invoice = obj.get("invoice") if isinstance(obj.get("invoice"), dict) else {}
    assert isinstance(invoice, dict)
    for holder, field in ((obj.get("metadata"), "invoice_number"), (invoice, "number")):
        value = holder.get(field) if isinstance(holder, dict) else None
        if isinstance(value, str) and 0 < len(value) <= 255 and value.isprintable():
            return value
    return None


def dispute_invoice_number(obj: Mapping[str, Any]) -> str | None:
    """The invoice number a Stripe dispute object names: its ``metadata.invoice_number``, or its charge's (when the
    charge is expanded) ``invoice.number`` (expanded too) or ``metadata.invoice_number``; None when none does."""
    charge = obj.get("charge") if isinstance(obj.get("charge"), dict) else {}
    assert isinstance(charge, dict)
    invoice = charge.get("invoice") if isinstance(charge.get("invoice"), dict) else {}
    assert isinstance(invoice, dict)
    for holder, field in ((obj.get("metadata"), "invoice_number"), (invoice, "number"),
                          (charge.get("metadata"), "invoice_number")):
        value = holder.get(field) if isinstance(holder, dict) else None
        if isinstance(value, str) and 0 < len(value) <= 255 and value.isprintable():
            return value
    return None
