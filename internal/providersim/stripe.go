package providersim

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Stripe face (SIM_API=stripe): the subset of Stripe's API that the
// Stripe connector uses, over the same state, faults and control API as
// the simulator's own API. A PaymentIntent is a Charge whose id starts
// with pi_ (its latest_charge is ch_ and the same suffix); a Stripe Refund
// is a Refund of it. Bodies are form-encoded, answers and errors are
// Stripe's JSON, and every POST follows Stripe's idempotency rules
// (stripe_idempotency.go).

// StripeAPIVersion is the api_version the Stripe face's events carry: the
// one stripe-go v82 pins (the tests check they agree).
const StripeAPIVersion = "2025-08-27.basil"

// Stripe error types.
const (
	stripeCardError           = "card_error"
	stripeInvalidRequestError = "invalid_request_error"
	stripeAPIError            = "api_error"
	stripeIdempotencyError    = "idempotency_error"
)

// Stripe PaymentIntent statuses.
const (
	piSucceeded             = "succeeded"
	piRequiresCapture       = "requires_capture"
	piRequiresPaymentMethod = "requires_payment_method"
	piRequiresConfirmation  = "requires_confirmation"
	piCanceled              = "canceled"
)

// stripeDecline is what a declining test payment method answers: the
// error's code and decline_code.
type stripeDecline struct{ code, declineCode string }

// stripeDeclines are Stripe's declining test payment methods (see Stripe's
// "Testing" documentation), and the simulator's own pm_card_declined.
var stripeDeclines = map[string]stripeDecline{
	declinedPaymentMethod:                         {"card_declined", "generic_decline"},
	"pm_card_chargeDeclined":                      {"card_declined", "generic_decline"},
	"pm_card_chargeDeclinedInsufficientFunds":     {"card_declined", "insufficient_funds"},
	"pm_card_chargeDeclinedFraudulent":            {"card_declined", "fraudulent"},
	"pm_card_chargeDeclinedLostCard":              {"card_declined", "lost_card"},
	"pm_card_chargeDeclinedStolenCard":            {"card_declined", "stolen_card"},
	"pm_card_chargeDeclinedVelocityLimitExceeded": {"card_declined", "card_velocity_exceeded"},
	"pm_card_chargeDeclinedExpiredCard":           {"expired_card", "expired_card"},
	"pm_card_chargeDeclinedIncorrectCvc":          {"incorrect_cvc", "incorrect_cvc"},
	"pm_card_chargeDeclinedProcessingError":       {"processing_error", "processing_error"},
	// A card that needs the customer (3-D Secure) cannot pay off-session.
	"pm_card_authenticationRequired": {"authentication_required", "authentication_required"},
}

// stripeCards are Stripe's succeeding test card payment methods (see
// Stripe's "Testing" documentation).
var stripeCards = map[string]bool{
	"pm_card_visa": true, "pm_card_visa_debit": true, "pm_card_mastercard": true, "pm_card_mastercard_debit": true,
	"pm_card_mastercard_prepaid": true, "pm_card_amex": true, "pm_card_discover": true, "pm_card_diners": true,
	"pm_card_jcb": true, "pm_card_unionpay": true,
}

// knownPaymentMethod reports whether the Stripe face knows pm: one of
// Stripe's test cards (stripeCards, stripeDeclines), or any other pm_ id
// that is not a pm_card_ one (a saved payment method the simulator takes
// on trust). Another (pm_card_bogus, card_1) answers Stripe's 400
// resource_missing, param payment_method.
func knownPaymentMethod(pm string) bool {
	if _, declines := stripeDeclines[pm]; declines || stripeCards[pm] {
		return true
	}
	return pm == "" || (strings.HasPrefix(pm, "pm_") && !strings.HasPrefix(pm, "pm_card_"))
}

// stripeCancelReasons are the cancellation_reason values a cancel takes.
var stripeCancelReasons = []string{"duplicate", "fraudulent", "requested_by_customer", "abandoned"}

// stripeRefundReasons are the reason values a refund takes.
var stripeRefundReasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

func (s *Server) stripeRoutes() http.Handler {
	v1 := http.NewServeMux()
	v1.HandleFunc("POST /v1/payment_intents", s.handleStripeCreatePI)
	v1.HandleFunc("GET /v1/payment_intents", s.handleStripeListPIs)
	v1.HandleFunc("GET /v1/payment_intents/{id}", s.handleStripeGetPI)
	v1.HandleFunc("POST /v1/payment_intents/{id}/confirm", s.handleStripeConfirm)
	v1.HandleFunc("POST /v1/payment_intents/{id}/capture", s.handleStripeCapture)
	v1.HandleFunc("POST /v1/payment_intents/{id}/cancel", s.handleStripeCancel)
	v1.HandleFunc("POST /v1/refunds", s.handleStripeCreateRefund)
	v1.HandleFunc("GET /v1/refunds", s.handleStripeListRefunds)
	v1.HandleFunc("GET /v1/refunds/{id}", s.handleStripeGetRefund)
	v1.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeStripeError(w, &stripeErr{status: http.StatusNotFound, Type: stripeInvalidRequestError,
			Message: "Unrecognized request URL (" + r.Method + ": " + r.URL.Path + ") for the simulator's Stripe face."})
	})
	return v1
}

// validAPIKey reports whether r carries "Authorization: Bearer <APIKey>",
// compared in constant time.
func (s *Server) validAPIKey(r *http.Request) bool {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(s.cfg.APIKey)) == 1
}

// stripeAuth answers Stripe's 401 unless the request carries the API key.
func (s *Server) stripeAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.validAPIKey(r) {
			writeStripeError(w, &stripeErr{status: http.StatusUnauthorized, Type: stripeInvalidRequestError,
				Message: "Invalid API Key provided."})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// stripeErr is Stripe's error object, answered as {"error":{…}}.
type stripeErr struct {
	status        int
	shouldRetry   string     // Stripe-Should-Retry, when set
	Type          string     `json:"type"`
	Code          string     `json:"code,omitempty"`
	DeclineCode   string     `json:"decline_code,omitempty"`
	Message       string     `json:"message,omitempty"`
	Param         string     `json:"param,omitempty"`
	PaymentIntent *stripePI  `json:"payment_intent,omitempty"`
	Charge        string     `json:"charge,omitempty"`
	PaymentMethod *stripeRef `json:"payment_method,omitempty"`
}

func (e *stripeErr) Error() string { return e.Type + " " + e.Code + ": " + e.Message }

// stripeRef is a bare {"id":…} for an object we do not model.
type stripeRef struct {
	ID     string `json:"id"`
	Object string `json:"object"`
}

func invalidParam(param, message string) *stripeErr {
	code := "parameter_invalid_string"
	return &stripeErr{status: http.StatusBadRequest, Type: stripeInvalidRequestError, Code: code, Param: param, Message: message}
}

func missingParam(param string) *stripeErr {
	return &stripeErr{status: http.StatusBadRequest, Type: stripeInvalidRequestError, Code: "parameter_missing", Param: param,
		Message: "Missing required param: " + param + "."}
}

func noSuch(what, param, id string) *stripeErr {
	return &stripeErr{status: http.StatusNotFound, Type: stripeInvalidRequestError, Code: "resource_missing", Param: param,
		Message: "No such " + what + ": '" + id + "'"}
}

func stripeErrorBody(e *stripeErr) []byte {
	b, err := json.Marshal(map[string]*stripeErr{"error": e})
	if err != nil {
		panic(err) // only our own types are encoded
	}
	return b
}

func writeStripeError(w http.ResponseWriter, e *stripeErr) {
	if e.shouldRetry != "" {
		w.Header().Set(headerShouldRetry, e.shouldRetry)
	}
	writeRaw(w, e.status, stripeErrorBody(e))
}

// stripeList is Stripe's list envelope.
type stripeList[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
}

// stripePI is a PaymentIntent as Stripe answers it.
type stripePI struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CanceledAt         *int64            `json:"canceled_at"`
	CancellationReason *string           `json:"cancellation_reason"`
	CaptureMethod      string            `json:"capture_method"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	LastPaymentError   *stripeErr        `json:"last_payment_error"`
	LatestCharge       any               `json:"latest_charge"` // the id, or the stripeCharge when expanded
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	PaymentMethod      *string           `json:"payment_method"`
	PaymentMethodTypes []string          `json:"payment_method_types"`
	Status             string            `json:"status"`
}

// stripeCharge is the Charge of a PaymentIntent.
type stripeCharge struct {
	ID                   string            `json:"id"`
	Object               string            `json:"object"`
	Amount               int64             `json:"amount"`
	AmountCaptured       int64             `json:"amount_captured"`
	AmountRefunded       int64             `json:"amount_refunded"`
	Captured             bool              `json:"captured"`
	Created              int64             `json:"created"`
	Currency             string            `json:"currency"`
	FailureCode          *string           `json:"failure_code"`
	Livemode             bool              `json:"livemode"`
	Metadata             map[string]string `json:"metadata"`
	Paid                 bool              `json:"paid"`
	PaymentIntent        string            `json:"payment_intent"`
	PaymentMethod        string            `json:"payment_method"`
	PaymentMethodDetails struct {
		Type string `json:"type"`
		Card struct {
			CaptureBefore int64 `json:"capture_before,omitempty"`
		} `json:"card"`
	} `json:"payment_method_details"`
	Refunded bool   `json:"refunded"`
	Status   string `json:"status"`
}

// stripeRefund is a Refund as Stripe answers it.
type stripeRefund struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Charge        string            `json:"charge"`
	Created       int64             `json:"created"`
	Currency      string            `json:"currency"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent string            `json:"payment_intent"`
	Reason        *string           `json:"reason"`
	Status        string            `json:"status"`
}

// chargeIDOf is the latest_charge of PaymentIntent piID.
func chargeIDOf(piID string) string { return "ch_" + strings.TrimPrefix(piID, "pi_") }

// piIDOf is the PaymentIntent of a charge id (ch_…) or of itself (pi_…).
func piIDOf(id string) string {
	if rest, ok := strings.CutPrefix(id, "ch_"); ok {
		return "pi_" + rest
	}
	return id
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// stripeChargeOf renders ch's Charge object.
func stripeChargeOf(ch Charge) stripeCharge {
	c := stripeCharge{
		ID: chargeIDOf(ch.ID), Object: "charge", Amount: ch.Amount, AmountCaptured: ch.AmountCaptured,
		AmountRefunded: ch.AmountRefunded, Captured: ch.Captured, Created: ch.Created,
		Currency: strings.ToLower(ch.Currency), Metadata: ch.Metadata.Map(), Paid: ch.Status != StatusFailed,
		PaymentIntent: ch.ID, PaymentMethod: ch.PaymentMethod, Refunded: ch.Refunded, Status: "succeeded",
	}
	c.PaymentMethodDetails.Type = "card"
	if ch.Status == StatusAuthorized {
		c.PaymentMethodDetails.Card.CaptureBefore = ch.CaptureBefore
	}
	if ch.Status == StatusFailed {
		c.Status, c.FailureCode = "failed", strPtr(ch.declineError())
	}
	return c
}

// declineError is the Stripe error code of a declined charge.
func (c *Charge) declineError() string {
	if c.DeclineErrorCode != "" {
		return c.DeclineErrorCode
	}
	return codeCardDeclined
}

// stripeDeclineErr is the card_error of declined charge ch.
func stripeDeclineErr(ch Charge) *stripeErr {
	return &stripeErr{
		status: http.StatusPaymentRequired, Type: stripeCardError, Code: ch.declineError(), DeclineCode: ch.FailureCode,
		Message: "Your card was declined.", Charge: chargeIDOf(ch.ID),
		PaymentMethod: &stripeRef{ID: ch.PaymentMethod, Object: "payment_method"},
	}
}

// stripePIOf renders ch as a PaymentIntent; expandCharge puts the Charge
// object in latest_charge instead of its id.
func stripePIOf(ch Charge, expandCharge bool) *stripePI {
	pi := &stripePI{
		ID: ch.ID, Object: "payment_intent", Amount: ch.Amount, AmountCapturable: ch.AmountCapturable,
		AmountReceived: ch.AmountCaptured, CaptureMethod: ch.CaptureMethod, ConfirmationMethod: "automatic",
		Created: ch.Created, Currency: strings.ToLower(ch.Currency), Metadata: ch.Metadata.Map(),
		PaymentMethod: strPtr(ch.PaymentMethod), PaymentMethodTypes: []string{"card"}, Status: piSucceeded,
		LatestCharge: chargeIDOf(ch.ID),
	}
	if pi.CaptureMethod == "" {
		pi.CaptureMethod = "automatic"
		if ch.manual() {
			pi.CaptureMethod = "manual"
		}
	}
	if expandCharge {
		pi.LatestCharge = stripeChargeOf(ch)
	}
	switch ch.Status {
	case StatusRequiresConfirmation:
		pi.Status, pi.LatestCharge = piRequiresConfirmation, nil
		if ch.PaymentMethod == "" {
			pi.Status = piRequiresPaymentMethod
		}
	case StatusFailed:
		pi.Status, pi.PaymentMethod = piRequiresPaymentMethod, nil
		pi.LastPaymentError = stripeDeclineErr(ch)
	case StatusAuthorized:
		pi.Status = piRequiresCapture
	case StatusVoided, StatusExpired:
		reason := ch.CancellationReason
		if ch.Status == StatusExpired {
			reason = "automatic"
		}
		pi.Status, pi.CancellationReason = piCanceled, strPtr(reason)
		at := ch.CaptureBefore
		pi.CanceledAt = &at
	}
	return pi
}

func stripeRefundOf(re Refund) stripeRefund {
	return stripeRefund{
		ID: re.ID, Object: "refund", Amount: re.Amount, Charge: chargeIDOf(re.Charge), Created: re.Created,
		Currency: strings.ToLower(re.Currency), Metadata: re.Metadata.Map(), PaymentIntent: re.Charge,
		Reason: strPtr(re.Reason), Status: re.Status,
	}
}

// expands reports whether the request's expand[] names field.
func expands(form url.Values, field string) bool {
	for k, vs := range form {
		if k == "expand" || k == "expand[]" || (strings.HasPrefix(k, "expand[") && strings.HasSuffix(k, "]")) {
			if slices.Contains(vs, field) {
				return true
			}
		}
	}
	return false
}

// metadataOf collects metadata[KEY]=VALUE parameters.
func metadataOf(form url.Values) map[string]string {
	var out map[string]string
	for k, vs := range form {
		if inner, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(inner, "]") && len(vs) > 0 {
			if out == nil {
				out = map[string]string{}
			}
			out[strings.TrimSuffix(inner, "]")] = vs[0]
		}
	}
	return out
}

// intParam parses an optional positive integer parameter; present is false
// when it is absent.
func intParam(form url.Values, name string) (n int64, present bool, err error) {
	raw := form.Get(name)
	if raw == "" {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(raw, 10, 64)
	if perr != nil || n <= 0 {
		return 0, true, &stripeErr{status: http.StatusBadRequest, Type: stripeInvalidRequestError,
			Code: "parameter_invalid_integer", Param: name, Message: "Invalid positive integer: " + name}
	}
	return n, true, nil
}

func oneOf(form url.Values, name string, allowed []string) (string, error) {
	v := form.Get(name)
	if v != "" && !slices.Contains(allowed, v) {
		return "", invalidParam(name, fmt.Sprintf("Invalid %s: must be one of %s", name, strings.Join(allowed, ", ")))
	}
	return v, nil
}

// piRequest is a validated POST /v1/payment_intents.
type piRequest struct {
	amount        int64
	currency      string
	paymentMethod string
	captureMethod string
	metadata      map[string]string
	confirm       bool // false: the PaymentIntent waits for POST …/confirm
}

func parsePIRequest(form url.Values) (piRequest, error) {
	amount, ok, err := intParam(form, "amount")
	switch {
	case err != nil:
		return piRequest{}, err
	case !ok:
		return piRequest{}, missingParam("amount")
	case form.Get("currency") == "":
		return piRequest{}, missingParam("currency")
	case form.Get("confirm") != "" && form.Get("confirm") != "true" && form.Get("confirm") != "false":
		return piRequest{}, invalidParam("confirm", "confirm must be true or false")
	case form.Get("confirm") == "true" && form.Get("payment_method") == "":
		return piRequest{}, missingParam("payment_method")
	}
	cm, err := oneOf(form, "capture_method", []string{"automatic", "automatic_async", "manual"})
	if err != nil {
		return piRequest{}, err
	}
	if cm == "" {
		cm = "automatic_async" // Stripe's default
	}
	for k, vs := range form {
		if strings.HasPrefix(k, "payment_method_types[") && !slices.Equal(vs, []string{"card"}) {
			return piRequest{}, invalidParam(k, "The simulator's Stripe face takes cards only.")
		}
	}
	return piRequest{
		// Kept upper case as the simulator's API keeps it (the control API
		// shows one form whatever the face); answered lower case.
		amount: amount, currency: strings.ToUpper(form.Get("currency")), paymentMethod: form.Get("payment_method"),
		captureMethod: cm, metadata: metadataOf(form), confirm: form.Get("confirm") == "true",
	}, nil
}

// newPI is the charge a PaymentIntent is: confirmed at once (decided by its
// payment method), or waiting for its confirmation.
func (s *Server) newPI(key string, req piRequest) *Charge {
	ch := &Charge{
		ID: newID("pi_"), Amount: req.amount, Currency: req.currency, Status: StatusRequiresConfirmation,
		Reference: req.metadata["psvc_payment"], IdempotencyKey: key, PaymentMethod: req.paymentMethod,
		Created: s.now().Unix(), Metadata: NewMetadata(req.metadata), CaptureMethod: req.captureMethod,
	}
	if req.confirm {
		s.confirmPI(ch)
	}
	return ch
}

// confirmPI decides an unconfirmed PaymentIntent by its payment method:
// declined, authorized (manual) or succeeded.
func (s *Server) confirmPI(ch *Charge) {
	manual := ch.CaptureMethod == "manual"
	if manual {
		ch.CaptureBefore = s.now().Unix() + int64(s.cfg.AuthTTL/time.Second)
	}
	switch d, declined := stripeDeclines[ch.PaymentMethod]; {
	case declined:
		ch.Status, ch.FailureCode, ch.DeclineErrorCode = StatusFailed, d.declineCode, d.code
	case manual:
		ch.Status, ch.AmountCapturable = StatusAuthorized, ch.Amount
	default:
		ch.Status, ch.Captured, ch.AmountCaptured = StatusSucceeded, true, ch.Amount
	}
}

// commitPI creates the PaymentIntent for key (the simulator's own key,
// which is the request's Idempotency-Key when it has one), or returns the
// one already made under it: made is false then.
func (s *Server) commitPI(key string, req piRequest) (ch Charge, made bool, err error) {
	defer s.lock()()
	if prev, _, ok := s.st.chargeByKey(key); ok {
		return *prev, false, nil
	}
	c := s.newPI(key, req)
	ans, err := chargeAnswer(c)
	if err != nil {
		return Charge{}, false, err
	}
	s.st.addCharge(c)
	s.st.chargeKeys[key] = &ans
	if err := s.persistLocked(); err != nil {
		s.st.removeCharge(c.ID)
		delete(s.st.chargeKeys, key)
		return Charge{}, false, fmt.Errorf("persist payment intent: %w", err)
	}
	s.log.Info("payment intent created", "payment_intent", c.ID, "idempotency_key", key, "status", c.Status, "amount", c.Amount)
	return *c, true, nil
}

// piAnswer is the answer about ch: 200 with the PaymentIntent, or the 402
// card_error carrying it for a decline.
func piAnswer(ch Charge, expand bool) (int, []byte) {
	pi := stripePIOf(ch, expand)
	if ch.Status == StatusFailed {
		e := stripeDeclineErr(ch)
		e.PaymentIntent = pi
		return e.status, stripeErrorBody(e)
	}
	b, err := json.Marshal(pi)
	if err != nil {
		panic(err)
	}
	return http.StatusOK, b
}

// handleStripeConfirm is POST /v1/payment_intents/{id}/confirm
// (payment_method optional: the one given at creation), of a PaymentIntent
// created without confirm=true; any other answers 400
// payment_intent_unexpected_state.
func (s *Server) handleStripeConfirm(w http.ResponseWriter, r *http.Request) {
	s.chargeCalls.Add(1)
	id := r.PathValue("id")
	s.serveStripePost(w, r, s.currentFaults, func(_ string, form url.Values) (stripeCommit, error) {
		if _, ok := s.piByID(id); !ok {
			return nil, noSuch("payment_intent", "intent", id)
		}
		pm := form.Get("payment_method")
		return func() (int, []byte, error) {
			ch, refusal, err := s.commitConfirm(id, pm)
			if err != nil {
				return 0, nil, err
			}
			if refusal != nil {
				return refusal.status, stripeErrorBody(refusal), nil
			}
			s.notifyCharge(chargeEventType(&ch), ch)
			status, body := piAnswer(ch, expands(form, "latest_charge"))
			return status, body, nil
		}, nil
	})
}

// commitConfirm confirms PaymentIntent id (with payment method pm, if
// given), or refuses one that is not waiting for it.
func (s *Server) commitConfirm(id, pm string) (Charge, *stripeErr, error) {
	defer s.lock()()
	ch, ok := s.st.charges[id]
	if !ok {
		return Charge{}, noSuch("payment_intent", "intent", id), nil
	}
	if ch.Status != StatusRequiresConfirmation || (pm == "" && ch.PaymentMethod == "") {
		pi := stripePIOf(*ch, false)
		return Charge{}, &stripeErr{status: http.StatusBadRequest, Type: stripeInvalidRequestError,
			Code: "payment_intent_unexpected_state", PaymentIntent: pi,
			Message: "This PaymentIntent's status is " + pi.Status + "; it cannot be confirmed."}, nil
	}
	before := *ch
	if pm != "" {
		ch.PaymentMethod = pm
	}
	s.confirmPI(ch)
	if ch.Status == StatusAuthorized {
		s.st.held[ch.ID] = ch
	}
	if err := s.persistLocked(); err != nil {
		*ch = before
		delete(s.st.held, ch.ID)
		return Charge{}, nil, fmt.Errorf("persist confirmation: %w", err)
	}
	s.log.Info("payment intent confirmed", "payment_intent", ch.ID, "status", ch.Status)
	return *ch, nil, nil
}

// handleStripeCreatePI is POST /v1/payment_intents (confirm=true, or
// unconfirmed for a later POST …/confirm).
func (s *Server) handleStripeCreatePI(w http.ResponseWriter, r *http.Request) {
	s.chargeCalls.Add(1)
	s.serveStripePost(w, r, s.currentFaults, func(key string, form url.Values) (stripeCommit, error) {
		req, err := parsePIRequest(form)
		if err != nil {
			return nil, err
		}
		return func() (int, []byte, error) {
			if !knownPaymentMethod(req.paymentMethod) {
				// Stripe looks the payment method up once the request
				// runs: the 400 is stored under the key like any answer.
				e := &stripeErr{status: http.StatusBadRequest, Type: stripeInvalidRequestError, Code: "resource_missing", Param: "payment_method",
					Message: "No such PaymentMethod: '" + req.paymentMethod + "'"}
				return e.status, stripeErrorBody(e), nil
			}
			ch, made, err := s.commitPI(key, req)
			if err != nil {
				return 0, nil, err
			}
			if made && ch.Status != StatusRequiresConfirmation {
				s.notifyCharge(chargeEventType(&ch), ch)
			}
			status, body := piAnswer(ch, expands(form, "latest_charge"))
			return status, body, nil
		}, nil
	})
}

// piByID reads a copy of PaymentIntent id.
func (s *Server) piByID(id string) (Charge, bool) {
	defer s.lock()()
	ch, ok := s.st.charges[id]
	if !ok {
		return Charge{}, false
	}
	return *ch, true
}

// mergeMetadata sets the keys of md on PaymentIntent id's metadata (an
// empty value unsets its key, as Stripe does).
func (s *Server) mergeMetadata(id string, md map[string]string) {
	defer s.lock()()
	ch, ok := s.st.charges[id]
	if !ok {
		return
	}
	m := ch.Metadata.Map()
	for k, v := range md {
		if v == "" {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	ch.Metadata = NewMetadata(m)
}

// handleStripeGetPI is GET /v1/payment_intents/{id}.
func (s *Server) handleStripeGetPI(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ch, ok := s.piByID(id)
	if !ok {
		writeStripeError(w, noSuch("payment_intent", "intent", id))
		return
	}
	writeJSON(w, http.StatusOK, stripePIOf(ch, expands(r.URL.Query(), "latest_charge")))
}

// Stripe's list limits.
const (
	stripeDefaultLimit = 10
	stripeMaxLimit     = 100
)

// listPage parses limit and starting_after; after is the cursor's id.
func listPage(q url.Values) (limit int, after string, err error) {
	limit = stripeDefaultLimit
	if raw := q.Get("limit"); raw != "" {
		n, perr := strconv.Atoi(raw)
		if perr != nil || n < 1 || n > stripeMaxLimit {
			return 0, "", invalidParam("limit", "limit must be an integer from 1 to 100")
		}
		limit = n
	}
	return limit, q.Get("starting_after"), nil
}

// page cuts one page of items (newest first) after the cursor id.
func page[T any](items []T, id func(T) string, limit int, after string) ([]T, bool, bool) {
	start := 0
	if after != "" {
		i := slices.IndexFunc(items, func(it T) bool { return id(it) == after })
		if i < 0 {
			return nil, false, false
		}
		start = i + 1
	}
	items = items[start:]
	if len(items) > limit {
		return items[:limit], true, true
	}
	return items, false, true
}

// createdRange parses created[gte|gt|lte|lt] (and a bare created=UNIX).
func createdRange(q url.Values) (func(int64) bool, error) {
	type bound struct {
		key string
		ok  func(c, v int64) bool
	}
	bounds := []bound{
		{"created[gte]", func(c, v int64) bool { return c >= v }},
		{"created[gt]", func(c, v int64) bool { return c > v }},
		{"created[lte]", func(c, v int64) bool { return c <= v }},
		{"created[lt]", func(c, v int64) bool { return c < v }},
		{"created", func(c, v int64) bool { return c == v }},
	}
	var checks []func(int64) bool
	for _, b := range bounds {
		raw := q.Get(b.key)
		if raw == "" {
			continue
		}
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, invalidParam(b.key, b.key+" must be a unix timestamp")
		}
		ok := b.ok
		checks = append(checks, func(c int64) bool { return ok(c, v) })
	}
	return func(c int64) bool {
		for _, check := range checks {
			if !check(c) {
				return false
			}
		}
		return true
	}, nil
}

// newestFirst orders by created, then id, both descending, as Stripe lists.
func newestFirst[T any](items []T, created func(T) int64, id func(T) string) {
	slices.SortFunc(items, func(a, b T) int {
		if c := created(b) - created(a); c != 0 {
			if c > 0 {
				return 1
			}
			return -1
		}
		return strings.Compare(id(b), id(a))
	})
}

// handleStripeListPIs is GET /v1/payment_intents.
func (s *Server) handleStripeListPIs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lr, serr := parseList(q)
	if serr != nil {
		writeStripeError(w, serr)
		return
	}
	unlock := s.lock()
	all := s.st.sortedCharges(func(c *Charge) bool { return lr.inRange(c.Created) }, 0)
	unlock()
	expand := expands(q, "data.latest_charge")
	writeList(w, lr, all, "payment_intent", "/v1/payment_intents",
		func(c Charge) int64 { return c.Created }, func(c Charge) string { return c.ID },
		func(c Charge) *stripePI { return stripePIOf(c, expand) })
}

// listRequest is what every list endpoint reads first: the created range
// and the page.
type listRequest struct {
	inRange func(int64) bool
	limit   int
	after   string
}

func parseList(q url.Values) (listRequest, *stripeErr) {
	inRange, err := createdRange(q)
	if err != nil {
		return listRequest{}, err.(*stripeErr)
	}
	limit, after, err := listPage(q)
	if err != nil {
		return listRequest{}, err.(*stripeErr)
	}
	return listRequest{inRange: inRange, limit: limit, after: after}, nil
}

// writeList answers the page lr asks for of items (of Stripe's object, at
// path), newest first, each rendered by render; a starting_after that names
// no item is Stripe's resource_missing.
func writeList[T, O any](w http.ResponseWriter, lr listRequest, items []T, object, path string,
	created func(T) int64, id func(T) string, render func(T) O) {
	newestFirst(items, created, id)
	got, more, ok := page(items, id, lr.limit, lr.after)
	if !ok {
		writeStripeError(w, noSuch(object, "starting_after", lr.after))
		return
	}
	out := stripeList[O]{Object: "list", Data: make([]O, 0, len(got)), HasMore: more, URL: path}
	for _, it := range got {
		out.Data = append(out.Data, render(it))
	}
	writeJSON(w, http.StatusOK, out)
}

// holdAnswer maps a refusal of commitHold to Stripe's error, or renders
// the PaymentIntent it answers.
func (s *Server) holdAnswer(id string, expand bool, err error) (int, []byte, error) {
	var ae *apiError
	if err != nil && !errors.As(err, &ae) {
		return 0, nil, err
	}
	ch, ok := s.piByID(id)
	if !ok {
		return 0, nil, noSuch("payment_intent", "intent", id)
	}
	if ae != nil {
		e := &stripeErr{status: http.StatusBadRequest, Type: stripeInvalidRequestError, Message: ae.message}
		switch ae.code {
		case codeAmountTooLarge:
			e.Code, e.Param = "amount_too_large", "amount_to_capture"
		case codeIdempotencyError:
			e.Type, e.Code = stripeIdempotencyError, codeIdempotencyError
		default:
			e.Code = "payment_intent_unexpected_state"
			e.Message = "This PaymentIntent's status is " + stripePIOf(ch, false).Status + "; it cannot be captured or canceled."
			e.PaymentIntent = stripePIOf(ch, false)
		}
		return e.status, stripeErrorBody(e), nil
	}
	b, merr := json.Marshal(stripePIOf(ch, expand))
	if merr != nil {
		return 0, nil, merr
	}
	return http.StatusOK, b, nil
}

// handleStripeCapture is POST /v1/payment_intents/{id}/capture.
func (s *Server) handleStripeCapture(w http.ResponseWriter, r *http.Request) {
	s.captureCalls.Add(1)
	id := r.PathValue("id")
	s.serveStripePost(w, r, s.captureFaults, func(key string, form url.Values) (stripeCommit, error) {
		amount, present, err := intParam(form, "amount_to_capture")
		if err != nil {
			return nil, err
		}
		if _, ok := s.piByID(id); !ok {
			return nil, noSuch("payment_intent", "intent", id)
		}
		req := opRequest{Charge: id}
		if present {
			req.Amount = &amount
		}
		return func() (int, []byte, error) {
			_, made, err := s.commitHold(key, req, captureOp)
			if made != nil {
				// Stripe's capture updates the PaymentIntent's metadata
				// with the metadata it is sent.
				if md := metadataOf(form); len(md) > 0 {
					s.mergeMetadata(id, md)
				}
				s.notifyCharge(EventChargeCaptured, *made)
			}
			return s.holdAnswer(id, expands(form, "latest_charge"), err)
		}, nil
	})
}

// handleStripeCancel is POST /v1/payment_intents/{id}/cancel: a void.
func (s *Server) handleStripeCancel(w http.ResponseWriter, r *http.Request) {
	s.voidCalls.Add(1)
	id := r.PathValue("id")
	s.serveStripePost(w, r, s.captureFaults, func(key string, form url.Values) (stripeCommit, error) {
		reason, err := oneOf(form, "cancellation_reason", stripeCancelReasons)
		if err != nil {
			return nil, err
		}
		if _, ok := s.piByID(id); !ok {
			return nil, noSuch("payment_intent", "intent", id)
		}
		req := opRequest{Charge: id, cancelReason: reason}
		return func() (int, []byte, error) {
			_, made, err := s.commitHold(key, req, voidOp)
			if made != nil {
				s.notifyCharge(EventChargeVoided, *made)
			}
			return s.holdAnswer(id, expands(form, "latest_charge"), err)
		}, nil
	})
}

// handleStripeCreateRefund is POST /v1/refunds (payment_intent, or charge).
func (s *Server) handleStripeCreateRefund(w http.ResponseWriter, r *http.Request) {
	s.refundCalls.Add(1)
	s.serveStripePost(w, r, s.refundFaults, func(key string, form url.Values) (stripeCommit, error) {
		pi := form.Get("payment_intent")
		if pi == "" && form.Get("charge") != "" {
			pi = piIDOf(form.Get("charge"))
		}
		if pi == "" {
			return nil, missingParam("payment_intent")
		}
		amount, present, err := intParam(form, "amount")
		if err != nil {
			return nil, err
		}
		reason, err := oneOf(form, "reason", stripeRefundReasons)
		if err != nil {
			return nil, err
		}
		if _, ok := s.piByID(pi); !ok {
			return nil, noSuch("payment_intent", "payment_intent", pi)
		}
		meta := metadataOf(form)
		req := refundRequest{opRequest: opRequest{Charge: pi, Reference: meta["psvc_refund"]}, meta: meta, reason: reason}
		if present {
			req.Amount = &amount
		}
		return func() (int, []byte, error) {
			ans, made, err := s.commitRefund(key, req)
			var ae *apiError
			switch {
			case errors.As(err, &ae):
				e := &stripeErr{status: http.StatusBadRequest, Type: stripeInvalidRequestError, Message: ae.message, Code: ae.code}
				switch ae.code {
				case codeAmountTooLarge:
					e.Param = "amount"
				case codeChargeNotRefundable:
					e.Code = "charge_not_refundable"
				case codeIdempotencyError:
					e.Type = stripeIdempotencyError
				}
				return e.status, stripeErrorBody(e), nil
			case err != nil:
				return 0, nil, err
			}
			if made != nil {
				s.notifyRefund(made.refund)
				s.notifyCharge(EventChargeRefunded, made.charge)
			}
			unlock := s.lock()
			re := *s.st.refunds[ans.ID]
			unlock()
			b, err := json.Marshal(stripeRefundOf(re))
			return http.StatusOK, b, err
		}, nil
	})
}

// handleStripeGetRefund is GET /v1/refunds/{id}.
func (s *Server) handleStripeGetRefund(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	re, ok := s.st.refunds[id]
	var out Refund
	if ok {
		out = *re
	}
	s.mu.Unlock()
	if !ok {
		writeStripeError(w, noSuch("refund", "id", id))
		return
	}
	writeJSON(w, http.StatusOK, stripeRefundOf(out))
}

// handleStripeListRefunds is GET /v1/refunds (?payment_intent, ?charge,
// created[…], limit, starting_after), newest first.
func (s *Server) handleStripeListRefunds(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lr, serr := parseList(q)
	if serr != nil {
		writeStripeError(w, serr)
		return
	}
	pi := q.Get("payment_intent")
	if pi == "" && q.Get("charge") != "" {
		pi = piIDOf(q.Get("charge"))
	}
	s.mu.Lock()
	all := s.st.sortedRefunds(func(re *Refund) bool { return (pi == "" || re.Charge == pi) && lr.inRange(re.Created) })
	s.mu.Unlock()
	writeList(w, lr, all, "refund", "/v1/refunds",
		func(re Refund) int64 { return re.Created }, func(re Refund) string { return re.ID }, stripeRefundOf)
}
