package console

import (
	"strconv"
	"strings"
)

// minorDigits is how many digits of an amount in minor units are after the
// decimal point, per ISO 4217, for the currencies where it is not 2. The
// codes without a minor unit at all (XAU, XDR, XXX and the like) count as 0.
var minorDigits = func() map[string]int {
	m := map[string]int{}
	for digits, codes := range map[int]string{
		0: "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF " +
			"XAG XAU XBA XBB XBC XBD XDR XPD XPT XSU XTS XUA XXX",
		3: "BHD IQD JOD KWD LYD OMR TND",
		4: "CLF UYW",
	} {
		for _, c := range strings.Fields(codes) {
			m[c] = digits
		}
	}
	return m
}()

// major formats amount, in currency's minor unit as the API and the
// console's forms take it, in the currency's major unit: 1250 USD is
// "12.50 USD", 1250 JPY "1250 JPY", 1250 KWD "1.250 KWD". An operator reads
// "2400 USD" as two thousand four hundred dollars; the pages show both.
func major(amount int64, currency string) string {
	digits, ok := minorDigits[currency]
	if !ok {
		digits = 2
	}
	neg := amount < 0
	if neg {
		amount = -amount // amounts are never below -MaxInt64
	}
	s := strconv.FormatInt(amount, 10)
	if digits > 0 {
		if len(s) <= digits {
			s = strings.Repeat("0", digits-len(s)+1) + s
		}
		s = s[:len(s)-digits] + "." + s[len(s)-digits:]
	}
	if neg {
		s = "-" + s
	}
	return s + " " + currency
}
