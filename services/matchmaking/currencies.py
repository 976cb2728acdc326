"""The currencies an entry fee may be in: the active ISO 4217 codes, without the ones that are not money.

:data:`ISO_4217_ACTIVE` is ISO 4217 List One (current currency and funds codes) as the maintenance agency
(SIX) publishes it, as of 2026-01-01: the Debian ``iso-codes`` 4.15 table with the amendments since then
(added XAD, XCG, ZWG; withdrawn ANG, BGN, CUC, HRK, SLL, ZWL). It is a constant on purpose (no download,
no dependency): when the agency publishes an amendment, update the set and the date above.

:data:`FEE_CURRENCIES` is that list without the codes nobody pays a fee in (:data:`NOT_MONEY`): precious
metals, bond-market and other units of account, the IMF's SDR, the testing code XTS and XXX ("no
currency"). Fund codes such as CHE or USN stay: they are currencies of account banks settle in.
"""

from __future__ import annotations

from typing import Final

ISO_4217_ACTIVE: Final = frozenset(
    """
    AED AFN ALL AMD AOA ARS AUD AWG AZN BAM BBD BDT BHD BIF BMD BND BOB BOV BRL BSD BTN BWP BYN BZD CAD
    CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL
    GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW
    KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD
    NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP
    SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD USN UYI UYU UYW UZS
    VED VES VND VUV WST XAD XAF XAG XAU XBA XBB XBC XBD XCD XCG XDR XOF XPD XPF XPT XSU XTS XUA XXX YER
    ZAR ZMW ZWG
    """.split()  # noqa: SIM905 - a table of codes reads better than 178 quoted strings
)
"""ISO 4217 List One, alphabetic codes (178), as of 2026-01-01."""

NOT_MONEY: Final = frozenset(
    {
        "XAG", "XAU", "XPD", "XPT",  # silver, gold, palladium, platinum
        "XBA", "XBB", "XBC", "XBD",  # European bond-market units
        "XDR", "XSU", "XUA", "XAD",  # SDR, Sucre, ADB unit of account, Arab accounting dinar
        "XTS", "XXX",  # reserved for testing; "no currency"
    }
)  # fmt: skip
"""List One codes that are units of account, metals or placeholders, not currencies a player pays in."""

FEE_CURRENCIES: Final = ISO_4217_ACTIVE - NOT_MONEY
"""The currencies a table's or queue entry's fee may be in."""


def currency_problem(code: str) -> str | None:
    """Why ``code`` cannot be a fee's currency, or ``None`` when it can."""
    if code in FEE_CURRENCIES:
        return None
    if code in NOT_MONEY:
        return (
            f"currency {code} is an ISO 4217 code for a unit of account, a metal or a placeholder, not money"
        )
    return f"currency must be an active ISO 4217 code such as USD or EUR, got {code!r}"
