package console

import "testing"

func TestMajorFormatsMinorUnitsByTheCurrencysExponent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		amount   int64
		currency string
		want     string
	}{
		{1250, "USD", "12.50 USD"},
		{2400, "EUR", "24.00 EUR"},
		{5, "USD", "0.05 USD"},
		{0, "USD", "0.00 USD"},
		{99999999999, "USD", "999999999.99 USD"},
		{1250, "JPY", "1250 JPY"},
		{1250, "KWD", "1.250 KWD"},
		{7, "BHD", "0.007 BHD"},
		{12345, "CLF", "1.2345 CLF"},
		{3, "XAU", "3 XAU"},
		{-150, "USD", "-1.50 USD"},
		{1250, "ZZZ", "12.50 ZZZ"}, // not a code the API takes: 2 digits
	} {
		if got := major(tc.amount, tc.currency); got != tc.want {
			t.Errorf("major(%d, %s) = %q, want %q", tc.amount, tc.currency, got, tc.want)
		}
	}
}
