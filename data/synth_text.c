// Text for the synthetic lines: corpora from Debian packages, generated receipt content,
// and the dictionaries that cover what each style can write.
#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "data/synth_internal.h"
#include "data/utf8.h"

// PaddleOCR's en_dict.txt order (printable ASCII), so synth dictionaries share its indices.
static const char EN_DICT_ORDER[] =
    "0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~!\"#$%&'()*+,-./";

// ---- a bounded line buffer --------------------------------------------------------------
typedef struct {
    char s[192];
    int n;
} Line;

static void put(Line *l, const char *s) {
    size_t k = strlen(s);
    if (l->n + k >= sizeof l->s) k = sizeof l->s - 1 - (size_t)l->n;
    memcpy(l->s + l->n, s, k);
    l->n += (int)k;
    l->s[l->n] = '\0';
}

static void putf(Line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(Line *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(l->s + l->n, sizeof l->s - (size_t)l->n, fmt, ap);
    va_end(ap);
    if (k > 0) l->n += k;
    if (l->n > (int)sizeof l->s - 1) l->n = (int)sizeof l->s - 1;
}

static void upper_ascii(char *s) {
    for (; *s; s++) *s = (char)toupper((unsigned char)*s);
}

// "ORG BANANAS 3LB" -> "Org Bananas 3lb"
static void title_ascii(char *s) {
    int start = 1;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalpha(c)) {
            *s = (char)(start ? toupper(c) : tolower(c));
            start = 0;
        } else {
            start = (c == ' ' || c == '\t' || c == '-' || c == '/');
        }
    }
}

// Amount in cents as "1234.56", optionally "1,234.56".
static void money(char *dst, size_t n, int64_t cents, int thousands) {
    int64_t units = cents / 100, frac = cents % 100;
    if (thousands && units >= 1000)
        snprintf(dst, n, "%lld,%03lld.%02lld", (long long)(units / 1000), (long long)(units % 1000), (long long)frac);
    else
        snprintf(dst, n, "%lld.%02lld", (long long)units, (long long)frac);
}

// Cents spread evenly over doublings between lo and hi cents (log-uniform-ish), in integers
// only so that labels do not depend on the maths library; prices like x.99 are common.
static int64_t price_cents(OcrRng *r, int64_t lo, int64_t hi) {
    int bands = 0;
    for (int64_t b = lo; b < hi; b *= 2) bands++;
    int k = synth_int(r, 0, bands > 0 ? bands - 1 : 0);
    int64_t b0 = lo << k, b1 = b0 * 2 < hi ? b0 * 2 : hi;
    int64_t c = ocr_rng_next_int(r, b0, b1);
    if (synth_chance(r, 0.35f)) c = c / 100 * 100 + SYNTH_PICK(r, ((const int[]){99, 49, 29, 79, 95, 0, 50}));
    return c < 1 ? 1 : c;
}

static void digits(Line *l, OcrRng *r, int n) {
    for (int i = 0; i < n; i++) putf(l, "%d", synth_int(r, 0, 9));
}

// ---- receipts ---------------------------------------------------------------------------
static const char *const ITEMS[] = {
    "BANANAS", "ORG BANANAS", "APPLES GALA", "HONEYCRISP", "AVOCADO", "LEMONS", "LIMES", "TOMATOES",
    "ROMA TOMATO", "ONIONS YEL", "POTATOES", "CARROTS", "BROCCOLI", "SPINACH", "ROMAINE", "CUCUMBER",
    "BELL PEPPER", "GARLIC", "MUSHROOMS", "STRAWBERRIES", "BLUEBERRIES", "GRAPES RED", "WHL MILK", "2% MILK",
    "SKIM MILK", "ALMOND MILK", "OAT MILK", "BUTTER", "EGGS LG", "CHEDDAR", "MOZZARELLA", "YOGURT",
    "GREEK YOGURT", "CREAM CHEESE", "SOUR CREAM", "BREAD WHT", "WHEAT BREAD", "BAGELS", "TORTILLAS",
    "CROISSANT", "MUFFIN", "DONUT", "CHKN BREAST", "GRND BEEF", "PORK CHOPS", "BACON", "SALMON FIL", "SHRIMP",
    "TURKEY DELI", "HAM SLICED", "HOT DOGS", "JASMINE RICE", "PENNE", "SPAGHETTI", "PASTA SAUCE", "CEREAL",
    "OATMEAL", "GRANOLA", "PEANUT BTR", "GRAPE JELLY", "HONEY", "FLOUR AP", "SUGAR", "OLIVE OIL", "CANOLA OIL",
    "KETCHUP", "MUSTARD", "MAYO", "SALSA", "CHIPS", "TORTILLA CHP", "PRETZELS", "CRACKERS", "COOKIES",
    "ICE CREAM", "FROZEN PIZZA", "FRZ VEG MIX", "COFFEE", "COFFEE BEANS", "TEA BAGS", "ORANGE JUICE",
    "APPLE JUICE", "SODA", "COLA", "DIET COLA", "SPARKLING WTR", "WATER", "SPRING WATER", "ENERGY DRINK",
    "BEER", "RED WINE", "PAPER TOWELS", "BATH TISSUE", "TISSUES", "DISH SOAP", "DETERGENT", "TRASH BAGS",
    "SHAMPOO", "TOOTHPASTE", "TOOTHBRUSH", "DEODORANT", "BATTERIES AA", "LIGHT BULB", "DOG FOOD",
    "CAT LITTER", "GREETING CARD", "MAGAZINE", "GUM", "CANDY BAR", "LATTE", "CAPPUCCINO", "AMERICANO",
    "ESPRESSO", "ICED TEA", "HOT CHOC", "BURGER", "CHEESEBURGER", "FRIES", "CHKN SANDWICH", "CAESAR SALAD",
    "SOUP OF DAY", "PIZZA SLICE", "BURRITO", "TACOS", "NACHOS", "PAD THAI", "FRIED RICE", "SUSHI ROLL",
    "RAMEN", "PANCAKES", "OMELETTE", "WAFFLES", "STEAK", "WINGS 10PC", "BROWNIE", "CHEESECAKE", "SMOOTHIE",
    "LEMONADE", "BAG FEE", "BOTTLE DEP", "GIFT CARD", "PHONE CASE", "USB CABLE", "NOTEBOOK", "PENS 10PK",
    "TAPE", "GLUE STICK", "SCREWS", "PAINT BRUSH", "LIGHTER", "SUNSCREEN", "VITAMINS", "ASPIRIN",
};
static const char *const SIZES[] = {"12OZ", "16OZ", "32OZ", "64OZ", "1GAL", "1/2GAL", "1LB", "2LB", "5LB",
                                    "500G", "1KG", "1L", "2L", "500ML", "750ML", "6PK", "12PK", "24PK",
                                    "12CT", "18CT", "LG", "SM", "MED", "XL", "FAM SZ", "2/$5"};
static const char *const BRANDS[] = {"ORG", "GV", "KS", "365", "GG", "MM", "SIG", "HT", "PC", "KRO"};
static const char *const TAXFLAGS[] = {"T", "F", "N", "A", "B", "X", "TX", "FS"};
static const char *const STORE_TYPES[] = {
    "MARKET", "SUPERMARKET", "GROCERY", "FOODS", "PHARMACY", "DRUG", "DELI", "CAFE", "COFFEE", "BAKERY",
    "DINER", "GRILL", "KITCHEN", "PIZZA", "HARDWARE", "MART", "STORE", "OUTLET", "BOOKS", "LIQUOR",
    "FUEL", "WHOLESALE", "FARMS", "BISTRO", "TAQUERIA", "NOODLE BAR"};
static const char *const STORE_WORDS[] = {
    "FRESH", "GREEN", "SUNNY", "HAPPY", "CORNER", "GOLDEN", "CITY", "VALLEY", "PRIME", "BEST", "FAMILY",
    "LUCKY", "STAR", "EAGLE", "PINE", "BLUE", "RED", "OLD TOWN", "MAIN ST", "UNION", "HARBOR", "NORTH",
    "SOUTH", "EAST", "WEST", "ROYAL", "URBAN", "DAILY", "QUICK", "SAVE", "VALUE", "METRO", "PARK"};
static const char *const STREETS[] = {
    "MAIN", "OAK", "MAPLE", "PINE", "CEDAR", "ELM", "WASHINGTON", "LAKE", "HILL", "PARK", "RIVER",
    "SUNSET", "BROADWAY", "CHURCH", "MARKET", "HIGH", "CENTER", "MILL", "SPRING", "UNION", "FRONT",
    "WATER", "FIRST", "SECOND", "THIRD", "5TH", "42ND", "LINCOLN", "JEFFERSON", "FRANKLIN", "MADISON"};
static const char *const STREET_SUFFIX[] = {"ST", "AVE", "BLVD", "RD", "DR", "LN", "WAY", "PKWY", "HWY",
                                            "CT", "PL", "STREET", "AVENUE", "ROAD", "ST.", "AVE."};
static const char *const CITIES[] = {
    "SPRINGFIELD", "RIVERSIDE", "FRANKLIN", "GREENVILLE", "BRISTOL", "CLINTON", "FAIRVIEW", "SALEM",
    "MADISON", "GEORGETOWN", "ARLINGTON", "ASHLAND", "DOVER", "OXFORD", "JACKSON", "MILTON", "NEWPORT",
    "AUBURN", "DAYTON", "LEXINGTON", "SEATTLE", "AUSTIN", "DENVER", "BOSTON", "PORTLAND", "CHICAGO",
    "HOUSTON", "PHOENIX", "ATLANTA", "DALLAS", "TORONTO", "SAN JOSE", "LAS VEGAS", "MIAMI", "TAMPA"};
static const char *const STATES[] = {"CA", "NY", "TX", "FL", "WA", "IL", "PA", "OH", "GA", "NC", "MI",
                                     "NJ", "VA", "AZ", "MA", "TN", "IN", "MO", "MD", "WI", "CO", "MN",
                                     "OR", "NV", "ON", "BC"};
static const char *const PEOPLE[] = {"MARIA", "JOHN", "ANNA", "DAVID", "SARAH", "MIKE", "LISA", "JAMES",
                                     "EMILY", "CARLOS", "KEVIN", "NINA", "TOM", "JESSICA", "ALEX", "SAM",
                                     "PRIYA", "WEI", "OMAR", "LUIS", "ROSA", "KIM", "ERIC", "JEN"};
static const char *const TOTAL_WORDS[] = {
    "SUBTOTAL", "SUB TOTAL", "SUB-TOTAL", "TOTAL", "TOTAL DUE", "BALANCE DUE", "AMOUNT DUE", "AMOUNT",
    "GRAND TOTAL", "CASH", "CASH TEND", "CHANGE", "CHANGE DUE", "VISA", "MASTERCARD", "AMEX", "DEBIT",
    "CREDIT", "TIP", "GRATUITY", "TOTAL SAVINGS", "YOU SAVED", "NET SALES", "BAL", "TEND", "EBT"};
static const char *const TAX_WORDS[] = {"TAX", "SALES TAX", "STATE TAX", "CITY TAX", "VAT", "GST", "HST", "TAX1",
                                        "TAX 2"};
static const char *const DISCOUNTS[] = {"DISCOUNT", "COUPON", "MEMBER SAVINGS", "PROMO", "INSTANT SAVINGS",
                                        "MFR COUPON", "LOYALTY", "BOGO", "SALE"};
static const char *const MONTHS[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                     "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
static const char *const MONTHS_LONG[] = {"January", "February", "March",     "April",   "May",      "June",
                                          "July",    "August",   "September", "October", "November", "December"};
static const char *const WEEKDAYS[] = {"MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"};
static const char *const ID_WORDS[] = {
    "INVOICE #", "INVOICE NO", "RECEIPT #", "RECEIPT NO:", "TRANS #", "TRANS:", "TRX", "ORDER #", "ORDER",
    "CHECK #", "TICKET", "REF #", "REF:", "AUTH CODE:", "AUTH #", "APPROVAL", "TERMINAL", "TERM ID:",
    "STORE #", "REG", "LANE", "SEQ #", "BATCH", "MID:", "TID:", "INV", "CUST #", "ACCT #", "PO #"};
static const char *const CARDS[] = {"VISA", "MC", "MASTERCARD", "AMEX", "DISCOVER", "DEBIT", "CARD", "ACCT",
                                    "CARD #", "CREDIT"};
static const char *const MISC[] = {
    "THANK YOU", "THANK YOU!", "THANKS FOR SHOPPING", "PLEASE COME AGAIN", "HAVE A NICE DAY",
    "CUSTOMER COPY", "MERCHANT COPY", "NO REFUNDS", "RETURNS WITHIN 30 DAYS", "KEEP YOUR RECEIPT",
    "SIGNATURE", "APPROVED", "DECLINED", "ENTRY: CHIP", "ENTRY METHOD: TAP", "CONTACTLESS", "PIN VERIFIED",
    "DUPLICATE", "REPRINT", "VOID", "REFUND", "SALE", "DINE IN", "TAKE OUT", "TO GO", "DRIVE THRU",
    "SELF CHECKOUT", "OPEN 24 HOURS", "STORE HOURS 7AM-11PM", "SURVEY AT WWW", "TELL US HOW WE DID",
    "GIFT RECEIPT", "PRICE OVERRIDE", "MEMBER", "REWARDS MEMBER", "POINTS EARNED", "SAVE MORE TODAY"};

// "2 X", "3 @", "QTY 2"
static void qty_prefix(Line *l, OcrRng *r) {
    int q = synth_chance(r, 0.7f) ? synth_int(r, 1, 4) : synth_int(r, 5, 24);
    switch (synth_int(r, 0, 3)) {
    case 0: putf(l, "%d ", q); break;
    case 1: putf(l, "%d X ", q); break;
    case 2: putf(l, "%dx ", q); break;
    default: putf(l, "QTY %d ", q); break;
    }
}

static void item_name(Line *l, OcrRng *r) {
    if (synth_chance(r, 0.15f)) putf(l, "%s ", SYNTH_PICK(r, BRANDS));
    put(l, SYNTH_PICK(r, ITEMS));
    if (synth_chance(r, 0.2f)) putf(l, " %s", SYNTH_PICK(r, SIZES));
}

static void price(Line *l, OcrRng *r, int64_t cents, float p_dollar) {
    char m[32];
    money(m, sizeof m, cents, 1);
    if (synth_chance(r, p_dollar)) put(l, "$");
    put(l, m);
}

static void receipt_item(Line *l, OcrRng *r) {
    int64_t c = price_cents(r, 25, 6000);
    switch (synth_int(r, 0, 9)) {
    case 0: case 1: case 2: case 3:
        item_name(l, r);
        break;
    case 4: case 5:
        qty_prefix(l, r);
        item_name(l, r);
        break;
    case 6: case 7:
        digits(l, r, synth_int(r, 4, 6));
        put(l, " ");
        item_name(l, r);
        break;
    case 8: {  // an item code line as in grocery receipts
        digits(l, r, synth_chance(r, 0.5f) ? 12 : synth_int(r, 4, 6));
        put(l, " ");
        item_name(l, r);
        break;
    }
    default:
        item_name(l, r);
        putf(l, " %d @ ", synth_int(r, 2, 6));
        price(l, r, c, 0.1f);
        c *= synth_int(r, 2, 6);
        break;
    }
    put(l, synth_chance(r, 0.85f) ? "\t" : " ");
    price(l, r, c, 0.15f);
    if (synth_chance(r, 0.3f)) putf(l, " %s", SYNTH_PICK(r, TAXFLAGS));
}

static void receipt_qty(Line *l, OcrRng *r) {
    int64_t unit = price_cents(r, 30, 1500);
    if (synth_chance(r, 0.5f)) {
        int q = synth_int(r, 2, 12);
        putf(l, "%d %s ", q, synth_chance(r, 0.5f) ? "@" : "X");
        price(l, r, unit, 0.2f);
        if (synth_chance(r, 0.5f)) {
            put(l, synth_chance(r, 0.5f) ? "\t" : " ");
            price(l, r, unit * q, 0.1f);
        }
    } else {  // weighed items
        int grams = synth_int(r, 80, 4500);
        const char *u = synth_chance(r, 0.6f) ? "lb" : "kg";
        if (synth_chance(r, 0.6f)) u = u[0] == 'l' ? "LB" : "KG";
        putf(l, "%d.%02d %s @ ", grams / 1000, (grams % 1000) / 10, u);
        price(l, r, unit, 0.2f);
        putf(l, "/%s", u);
    }
}

static void receipt_total(Line *l, OcrRng *r) {
    int64_t c = price_cents(r, 200, 80000);
    int k = synth_int(r, 0, 9);
    if (k < 6) {
        put(l, SYNTH_PICK(r, TOTAL_WORDS));
        if (synth_chance(r, 0.2f)) put(l, ":");
    } else if (k < 8) {
        put(l, SYNTH_PICK(r, TAX_WORDS));
        if (synth_chance(r, 0.5f))
        {
            putf(l, " %d.", synth_int(r, 4, 12));
            put(l, SYNTH_PICK(r, ((const char *[]){"0", "25", "5", "75", "375", "875"})));
            put(l, "%");
        }
        c = c / 12 + 1;
    } else {
        put(l, SYNTH_PICK(r, DISCOUNTS));
        put(l, synth_chance(r, 0.85f) ? "\t" : " ");
        put(l, "-");
        price(l, r, c / 8 + 1, 0.2f);
        return;
    }
    put(l, synth_chance(r, 0.85f) ? "\t" : " ");
    if (synth_chance(r, 0.1f)) put(l, "USD ");
    price(l, r, c, 0.35f);
}

static void receipt_date(Line *l, OcrRng *r) {
    int y = synth_int(r, 2015, 2029), m = synth_int(r, 1, 12), d = synth_int(r, 1, 28);
    int hh = synth_int(r, 0, 23), mm = synth_int(r, 0, 59), ss = synth_int(r, 0, 59);
    if (synth_chance(r, 0.3f)) put(l, synth_chance(r, 0.5f) ? "DATE: " : "DATE ");
    switch (synth_int(r, 0, 6)) {
    case 0: putf(l, "%02d/%02d/%04d", m, d, y); break;
    case 1: putf(l, "%02d/%02d/%02d", m, d, y % 100); break;
    case 2: putf(l, "%04d-%02d-%02d", y, m, d); break;
    case 3: putf(l, "%02d.%02d.%04d", d, m, y); break;
    case 4: putf(l, "%s %02d %04d", MONTHS[m - 1], d, y); break;
    case 5: putf(l, "%02d-%s-%04d", d, MONTHS[m - 1], y); break;
    default: putf(l, "%s %02d/%02d/%02d", WEEKDAYS[synth_int(r, 0, 6)], m, d, y % 100); break;
    }
    if (synth_chance(r, 0.6f)) {
        put(l, synth_chance(r, 0.3f) ? "\t" : " ");
        if (synth_chance(r, 0.4f))
            putf(l, "%d:%02d %s", hh % 12 == 0 ? 12 : hh % 12, mm, hh < 12 ? "AM" : "PM");
        else if (synth_chance(r, 0.5f))
            putf(l, "%02d:%02d:%02d", hh, mm, ss);
        else
            putf(l, "%02d:%02d", hh, mm);
    }
}

static void receipt_id(Line *l, OcrRng *r) {
    if (synth_chance(r, 0.15f)) {  // the classic register line
        putf(l, "ST# %04d", synth_int(r, 1, 9999));
        putf(l, " OP# %04d", synth_int(r, 1, 9999));
        putf(l, " TE# %02d", synth_int(r, 1, 40));
        return;
    }
    put(l, SYNTH_PICK(r, ID_WORDS));
    put(l, synth_chance(r, 0.8f) ? " " : "\t");
    switch (synth_int(r, 0, 4)) {
    case 0: digits(l, r, synth_int(r, 3, 8)); break;
    case 1: digits(l, r, 4); put(l, "-"); digits(l, r, 4); break;
    case 2:
        putf(l, "%c", 'A' + synth_int(r, 0, 25));
        putf(l, "%c", 'A' + synth_int(r, 0, 25));
        digits(l, r, synth_int(r, 4, 7));
        break;
    case 3:  // hex-ish auth codes
        for (int i = 0, n = synth_int(r, 6, 8); i < n; i++) {
            int v = synth_int(r, 0, 15);
            putf(l, "%c", v < 10 ? '0' + v : 'A' + v - 10);
        }
        break;
    default: putf(l, "%d", synth_int(r, 1, 999)); break;
    }
}

static void phone_number(Line *l, OcrRng *r) {
    int a = synth_int(r, 201, 989), b = synth_int(r, 200, 999), c = synth_int(r, 0, 9999);
    switch (synth_int(r, 0, 4)) {
    case 0: putf(l, "(%03d) %03d-%04d", a, b, c); break;
    case 1: putf(l, "%03d-%03d-%04d", a, b, c); break;
    case 2: putf(l, "%03d.%03d.%04d", a, b, c); break;
    case 3: putf(l, "+1 %03d %03d %04d", a, b, c); break;
    default: putf(l, "1-800-%03d-%04d", b, c); break;
    }
}

static void receipt_phone(Line *l, OcrRng *r) {
    static const char *const W[] = {"TEL", "TEL:", "PHONE", "PHONE:", "PH", "PH:", "FAX", "CALL", "Tel.", "Tel:"};
    if (synth_chance(r, 0.85f)) putf(l, "%s ", SYNTH_PICK(r, W));
    phone_number(l, r);
}

static void receipt_card(Line *l, OcrRng *r) {
    int last4 = synth_int(r, 0, 9999);
    char mask = synth_chance(r, 0.6f) ? '*' : 'X';
    put(l, SYNTH_PICK(r, CARDS));
    put(l, synth_chance(r, 0.7f) ? " " : "\t");
    switch (synth_int(r, 0, 3)) {
    case 0: for (int i = 0; i < 12; i++) putf(l, "%c", mask); break;
    case 1: for (int i = 0; i < 3; i++) putf(l, "%c%c%c%c ", mask, mask, mask, mask); break;
    case 2: putf(l, "%c%c%c%c ", mask, mask, mask, mask); break;
    default: for (int i = 0; i < 4; i++) putf(l, "%c", mask); break;
    }
    putf(l, "%04d", last4);
}

static const char *corpus_name(const SynthCorpus *c, OcrRng *r, const char *const *fallback, int n) {
    if (c->num_names > 0 && synth_chance(r, 0.5f)) return c->names[ocr_rng_next_int(r, 0, c->num_names - 1)];
    return fallback[synth_int(r, 0, n - 1)];
}

// Each put draws at most one random number: C leaves the order in which function arguments
// are evaluated open, and the text must not depend on the compiler.
static void put_pick(Line *l, OcrRng *r, const char *const *arr, int n) { put(l, arr[synth_int(r, 0, n - 1)]); }
#define PUT_PICK(l, r, arr) put_pick((l), (r), (arr), SYNTH_COUNT(arr))
static void put_name(Line *l, OcrRng *r, const SynthCorpus *c, const char *const *fallback, int n) {
    put(l, corpus_name(c, r, fallback, n));
}
#define PUT_NAME(l, r, c, arr) put_name((l), (r), (c), (arr), SYNTH_COUNT(arr))

static void receipt_store(Line *l, OcrRng *r, const SynthCorpus *c) {
    switch (synth_int(r, 0, 4)) {
    case 0: PUT_PICK(l, r, STORE_WORDS); break;
    case 1: PUT_NAME(l, r, c, PEOPLE); put(l, "'S"); break;
    case 2: put(l, "THE "); PUT_PICK(l, r, STORE_WORDS); break;
    case 3: PUT_NAME(l, r, c, STORE_WORDS); put(l, " & "); PUT_NAME(l, r, c, STORE_WORDS); break;
    default: PUT_NAME(l, r, c, CITIES); break;
    }
    put(l, " ");
    PUT_PICK(l, r, STORE_TYPES);
    if (synth_chance(r, 0.3f)) putf(l, " #%d", synth_int(r, 1, 9999));
}

static void receipt_address(Line *l, OcrRng *r, const SynthCorpus *c) {
    if (synth_chance(r, 0.55f)) {
        putf(l, "%d ", synth_int(r, 1, 9999));
        if (synth_chance(r, 0.15f)) PUT_PICK(l, r, ((const char *[]){"N ", "S ", "E ", "W "}));
        PUT_NAME(l, r, c, STREETS);
        put(l, " ");
        PUT_PICK(l, r, STREET_SUFFIX);
        if (synth_chance(r, 0.15f)) putf(l, " STE %d", synth_int(r, 100, 999));
    } else {
        PUT_NAME(l, r, c, CITIES);
        put(l, ", ");
        PUT_PICK(l, r, STATES);
        putf(l, " %05d", synth_int(r, 1000, 99950));
    }
}

// Returns 0 when the line must keep its case (a web address).
static int receipt_misc(Line *l, OcrRng *r, const SynthCorpus *c) {
    switch (synth_int(r, 0, 7)) {
    case 0: put(l, "CASHIER: "); PUT_NAME(l, r, c, PEOPLE); break;
    case 1:
        PUT_PICK(l, r, ((const char *[]){"SERVER:", "SERVER", "HOST:", "YOUR CASHIER"}));
        put(l, " ");
        PUT_NAME(l, r, c, PEOPLE);
        break;
    case 2:
        PUT_PICK(l, r, ((const char *[]){"TABLE", "TABLE #", "GUESTS", "ITEMS SOLD", "# ITEMS", "ITEM COUNT:", "POINTS"}));
        putf(l, " %d", synth_int(r, 1, 48));
        break;
    case 3: {
        const char *w = corpus_name(c, r, STORE_WORDS, SYNTH_COUNT(STORE_WORDS));
        put(l, "WWW.");
        for (const char *p = w; *p; p++)
            if (isalnum((unsigned char)*p)) putf(l, "%c", *p);
        PUT_PICK(l, r, ((const char *[]){".COM", ".NET", ".ORG", ".CO"}));
        if (synth_chance(r, 0.4f))
            for (char *p = l->s; *p; p++) *p = (char)tolower((unsigned char)*p);
        return 0;
    }
    default: PUT_PICK(l, r, MISC); break;
    }
    return 1;
}

static void receipt_line(Line *l, OcrRng *r, const SynthCorpus *c) {
    float u = ocr_rng_next_uniform(r);
    int casing = 0;  // 0 upper, 1 title, 2 as written
    if (u < 0.36f) receipt_item(l, r), casing = 1;
    else if (u < 0.42f) receipt_qty(l, r);
    else if (u < 0.56f) receipt_total(l, r), casing = 1;
    else if (u < 0.64f) receipt_date(l, r);
    else if (u < 0.72f) receipt_id(l, r);
    else if (u < 0.76f) receipt_phone(l, r);
    else if (u < 0.81f) receipt_card(l, r);
    else if (u < 0.86f) receipt_store(l, r, c), casing = 1;
    else if (u < 0.92f) receipt_address(l, r, c), casing = 1;
    else casing = receipt_misc(l, r, c);
    if (casing == 1) {
        float v = ocr_rng_next_uniform(r);
        if (v < 0.72f) upper_ascii(l->s);
        else if (v < 0.95f) title_ascii(l->s);
    }
}

// ---- documents ----------------------------------------------------------------------------
static const char *const ROMAN[] = {"I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"};

static const char *word(const SynthCorpus *c, OcrRng *r) {
    static const char *const FALLBACK[] = {"the", "of", "and", "page", "report", "total", "note", "section"};
    if (c->num_words == 0) return SYNTH_PICK(r, FALLBACK);
    return c->words[ocr_rng_next_int(r, 0, c->num_words - 1)];
}

static void doc_words(Line *l, OcrRng *r, const SynthCorpus *c) {
    int n = synth_int(r, 1, 4);
    int casing = synth_int(r, 0, 9);  // 0-5 as is, 6-7 first capital, 8 title, 9 upper
    for (int i = 0; i < n; i++) {
        const char *w = (c->num_names > 0 && synth_chance(r, 0.12f)) ? c->names[ocr_rng_next_int(r, 0, c->num_names - 1)]
                                                                      : word(c, r);
        if (i) put(l, " ");
        int start = l->n;
        put(l, w);
        if (casing == 9 || (casing == 8) || (casing >= 6 && i == 0)) {
            if (casing == 9) upper_ascii(l->s + start);
            else l->s[start] = (char)toupper((unsigned char)l->s[start]);
        }
    }
    if (synth_chance(r, 0.3f)) put(l, SYNTH_PICK(r, ((const char *[]){".", ",", ";", ":", "?", "!", "...", ")"})));
}

static void put_word(Line *l, OcrRng *r, const SynthCorpus *c) { put(l, word(c, r)); }

static void doc_numbers(Line *l, OcrRng *r, const SynthCorpus *c) {
    char m[32];
    switch (synth_int(r, 0, 13)) {
    case 0:
        putf(l, "Page %d", synth_int(r, 1, 40));
        putf(l, " of %d", synth_int(r, 40, 400));
        break;
    case 1:
        putf(l, "Section %d", synth_int(r, 1, 12));
        putf(l, ".%d", synth_int(r, 1, 9));
        if (synth_chance(r, 0.4f)) putf(l, ".%d", synth_int(r, 1, 9));
        break;
    case 2:
        PUT_PICK(l, r, ((const char *[]){"Figure", "Fig.", "Table", "Chapter", "Appendix", "Item", "Step", "Note"}));
        putf(l, " %d", synth_int(r, 1, 30));
        if (synth_chance(r, 0.4f)) put(l, ": "), put_word(l, r, c);
        break;
    case 3: put(l, "Chapter "); PUT_PICK(l, r, ROMAN); break;
    case 4:
        putf(l, "Vol. %d", synth_int(r, 1, 60));
        putf(l, ", No. %d", synth_int(r, 1, 12));
        break;
    case 5: {
        int a = synth_int(r, 1, 900);
        putf(l, "pp. %d-%d", a, a + synth_int(r, 3, 40));
        break;
    }
    case 6:
        PUT_PICK(l, r, MONTHS_LONG);
        putf(l, " %d", synth_int(r, 1, 28));
        putf(l, ", %d", synth_int(r, 1950, 2030));
        break;
    case 7:
        money(m, sizeof m, price_cents(r, 100, 9000000), 1);
        putf(l, "$%s", m);
        if (synth_chance(r, 0.5f)) put(l, " "), put_word(l, r, c);
        break;
    case 8:
        putf(l, "%d", synth_int(r, 0, 99));
        putf(l, ".%d%% ", synth_int(r, 0, 9));
        put_word(l, r, c);
        break;
    case 9: putf(l, "(see p. %d)", synth_int(r, 1, 600)); break;
    case 10:
        put_word(l, r, c);
        put(l, "@");
        put_word(l, r, c);
        PUT_PICK(l, r, ((const char *[]){".com", ".org", ".net", ".edu"}));
        break;
    case 11:
        put(l, "www.");
        put_word(l, r, c);
        PUT_PICK(l, r, ((const char *[]){".com", ".org", ".net", ".io"}));
        break;
    case 12: put(l, "Tel. "); phone_number(l, r); break;
    default:
        putf(l, "%d. ", synth_int(r, 1, 20));
        put_word(l, r, c);
        put(l, " ");
        put_word(l, r, c);
        break;
    }
}

static void doc_phrase(Line *l, OcrRng *r, const SynthCorpus *c) {
    int target = synth_chance(r, 0.85f) ? synth_int(r, 6, 22) : synth_int(r, 3, 25);
    int64_t i = ocr_rng_next_int(r, 0, c->num_tokens - 1);
    for (int k = 0; i < c->num_tokens; i++, k++) {
        int len = (int)strlen(c->tokens[i]);
        if (k > 0 && l->n + 1 + len > target) break;
        if (k > 0) put(l, " ");
        put(l, c->tokens[i]);
    }
}

static void document_line(Line *l, OcrRng *r, const SynthCorpus *c) {
    float u = ocr_rng_next_uniform(r);
    if (c->num_tokens > 0 && u < 0.55f) doc_phrase(l, r, c);
    else if (u < 0.82f) doc_words(l, r, c);
    else doc_numbers(l, r, c);
}

// ---- Chinese -------------------------------------------------------------------------------
// Frequent characters (every one is in PaddleOCR's ppocr_keys_v1.txt); the template tables
// below add the receipt vocabulary. The dictionary is built from all of them.
static const char ZH_FREQUENT[] =
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好"
    "都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此"
    "实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真"
    "听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路"
    "期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统"
    "色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半"
    "候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容"
    "研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坐集编宝谈府拉黑且"
    "随格尽剑讲布杀微怕母调局根曾准团段终乐切级克精哪官示冷域病料养价注意售购票据账付款退换货零售批发优惠券积分卡号码址";

static const char *const ZH_CITIES[] = {"北京", "上海", "广州", "深圳", "杭州", "南京", "成都", "武汉", "西安",
                                        "重庆", "天津", "苏州", "长沙", "郑州", "青岛", "厦门", "福州", "合肥",
                                        "济南", "昆明", "大连", "宁波", "无锡", "东莞", "佛山"};
static const char *const ZH_DISTRICTS[] = {"朝阳", "海淀", "东城", "西城", "浦东", "徐汇", "静安", "黄浦", "天河",
                                           "越秀", "海珠", "南山", "福田", "罗湖", "宝安", "西湖", "上城", "鼓楼",
                                           "玄武", "锦江", "武侯", "江汉", "雁塔", "渝中", "和平"};
static const char *const ZH_ROADS[] = {"人民", "中山", "解放", "建设", "长江", "黄河", "文化", "科技", "新华", "和平",
                                       "胜利", "北京", "南京", "东风", "青年", "光明", "幸福", "友谊", "学府", "滨江"};
static const char *const ZH_ROAD_SUFFIX[] = {"路", "大道", "街", "东路", "西路", "南路", "北路"};
static const char *const ZH_BRANDS[] = {"华联", "家乐", "永辉", "好又多", "百佳", "美宜佳", "全家", "快客", "联华",
                                        "新华", "大润发", "物美", "万家", "惠民", "佳佳", "优选", "鲜丰", "便民",
                                        "兴隆", "金牛", "阳光", "老王", "张记", "李记", "福满多"};
static const char *const ZH_STORE_TYPES[] = {"超市", "便利店", "购物中心", "餐厅", "饭店", "药房", "大药房", "书店",
                                             "水果店", "面包房", "茶餐厅", "火锅店", "烧烤店", "咖啡馆", "奶茶店",
                                             "五金店", "百货商店", "生鲜超市", "面馆", "小吃店"};
static const char *const ZH_HEADERS[] = {"购物小票", "收银小票", "销售小票", "销售单", "结账单", "欢迎光临", "谢谢惠顾",
                                         "欢迎再次光临", "请保留小票", "凭小票退换货", "七天无理由退换", "顾客联",
                                         "商户联", "交易成功", "签购单", "持卡人签名", "本人确认以上交易",
                                         "请妥善保管", "多谢光临", "祝您购物愉快", "会员专享", "今日特价"};
static const char *const ZH_ITEMS[] = {
    "苹果", "香蕉", "橙子", "西瓜", "葡萄", "草莓", "梨", "桃子", "芒果", "菠萝", "柠檬", "牛奶", "酸奶", "面包",
    "鸡蛋", "大米", "面粉", "食用油", "花生油", "酱油", "香醋", "食盐", "白糖", "红糖", "茶叶", "绿茶", "红茶",
    "咖啡", "可乐", "雪碧", "矿泉水", "纯净水", "啤酒", "白酒", "红酒", "果汁", "饼干", "薯片", "巧克力",
    "方便面", "火腿肠", "猪肉", "牛肉", "羊肉", "鸡肉", "鸡腿", "鸡翅", "鲜鱼", "大虾", "蔬菜", "白菜", "青菜",
    "菠菜", "土豆", "西红柿", "番茄", "黄瓜", "胡萝卜", "洋葱", "大蒜", "生姜", "辣椒", "豆腐", "香菇", "洗发水",
    "沐浴露", "牙膏", "牙刷", "纸巾", "卫生纸", "洗衣液", "洗洁精", "毛巾", "垃圾袋", "电池", "雨伞", "口罩",
    "笔记本", "圆珠笔", "米饭", "炒饭", "面条", "牛肉面", "饺子", "包子", "馒头", "豆浆", "油条", "宫保鸡丁",
    "鱼香肉丝", "麻婆豆腐", "红烧肉", "糖醋排骨", "回锅肉", "水煮鱼", "酸菜鱼", "青椒肉丝", "番茄炒蛋",
    "凉拌黄瓜", "紫菜蛋花汤", "奶茶", "珍珠奶茶", "拿铁", "美式咖啡", "蛋糕", "月饼", "粽子", "汤圆", "酸辣粉",
    "小笼包", "烤鸭", "羊肉串", "冰淇淋", "橙汁", "椰汁", "王老吉", "购物袋"};
static const char *const ZH_SPECS[] = {"500g", "1kg", "250ml", "500ml", "1.5L", "2L", "12瓶", "6罐", "袋装", "盒装",
                                       "瓶装", "散装", "特价", "大份", "小份", "中杯", "大杯", "（大）", "（小）",
                                       "*2", "/斤", "/个", "/盒", "/份"};
static const char *const ZH_TOTALS[] = {"合计", "小计", "总计", "应收", "实收", "找零", "现金", "微信支付", "支付宝",
                                        "银行卡", "刷卡", "金额", "总金额", "应付金额", "实付金额", "支付金额",
                                        "税额", "价税合计", "会员价", "原价", "人民币", "储值卡", "消费金额"};
static const char *const ZH_COUNTS[] = {"件数", "数量", "积分", "本次积分", "累计积分", "总件数", "台号", "人数",
                                        "桌号", "机号", "班次", "收款台", "页码"};
static const char *const ZH_FIELDS[] = {"单号", "流水号", "订单号", "交易号", "发票代码", "发票号码", "会员卡号",
                                        "商户编号", "终端号", "凭证号", "批次号", "参考号", "授权码", "税号"};
static const char *const ZH_SURNAMES[] = {"张", "王", "李", "刘", "陈", "杨", "黄", "赵", "吴", "周", "徐", "孙",
                                          "马", "朱", "胡", "郭", "何", "林", "高", "罗"};
static const char *const ZH_GIVEN[] = {"伟", "芳", "娜", "敏", "静", "丽", "强", "磊", "军", "洋", "勇", "艳",
                                       "杰", "娟", "涛", "明", "超", "秀英", "霞", "平", "刚", "桂英", "建华", "志强"};
static const char *const ZH_MISC[] = {"营业时间", "星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日",
                                      "优惠", "折扣", "打折", "满减", "会员", "非会员", "退货", "换货", "开票", "打印时间",
                                      "交易时间", "交易类型", "消费", "撤销", "收银员", "电话", "地址", "日期", "时间",
                                      "单价", "规格", "商品名称", "备注", "共计", "第一联"};
// Words written by zh_line's code rather than picked from a table (listed for the dictionary).
static const char *const ZH_LITERALS[] = {"日期", "交易时间", "开票日期", "打印时间", "收银员", "电话", "手机", "地址",
                                          "市", "区", "号", "店", "年", "月", "日", "元"};
static const char *const ZH_PUNCT[] = {"：", "，", "。", "、", "（", "）", "¥", "￥", "×", "【", "】"};

typedef struct {
    const char *const *items;
    int n;
} ZhTable;
static const ZhTable ZH_TABLES[] = {
    {ZH_CITIES, SYNTH_COUNT(ZH_CITIES)},       {ZH_DISTRICTS, SYNTH_COUNT(ZH_DISTRICTS)},
    {ZH_ROADS, SYNTH_COUNT(ZH_ROADS)},         {ZH_ROAD_SUFFIX, SYNTH_COUNT(ZH_ROAD_SUFFIX)},
    {ZH_BRANDS, SYNTH_COUNT(ZH_BRANDS)},       {ZH_STORE_TYPES, SYNTH_COUNT(ZH_STORE_TYPES)},
    {ZH_HEADERS, SYNTH_COUNT(ZH_HEADERS)},     {ZH_ITEMS, SYNTH_COUNT(ZH_ITEMS)},
    {ZH_SPECS, SYNTH_COUNT(ZH_SPECS)},         {ZH_TOTALS, SYNTH_COUNT(ZH_TOTALS)},
    {ZH_COUNTS, SYNTH_COUNT(ZH_COUNTS)},       {ZH_FIELDS, SYNTH_COUNT(ZH_FIELDS)},
    {ZH_SURNAMES, SYNTH_COUNT(ZH_SURNAMES)},   {ZH_GIVEN, SYNTH_COUNT(ZH_GIVEN)},
    {ZH_MISC, SYNTH_COUNT(ZH_MISC)},           {ZH_PUNCT, SYNTH_COUNT(ZH_PUNCT)},
    {ZH_LITERALS, SYNTH_COUNT(ZH_LITERALS)},
};

static const char *zh_colon(OcrRng *r) { return synth_chance(r, 0.75f) ? "：" : (synth_chance(r, 0.5f) ? ":" : " "); }

static void zh_money(Line *l, OcrRng *r, int64_t lo, int64_t hi) {
    char m[32];
    money(m, sizeof m, price_cents(r, lo, hi), 0);
    float u = ocr_rng_next_uniform(r);
    if (u < 0.3f) put(l, "¥");
    else if (u < 0.45f) put(l, "￥");
    put(l, m);
    if (u > 0.85f) put(l, "元");
}

// One random frequent character (3 UTF-8 bytes each in ZH_FREQUENT).
static void zh_random_char(Line *l, OcrRng *r) {
    int n = (int)(sizeof ZH_FREQUENT - 1) / 3;
    int i = synth_int(r, 0, n - 1);
    char ch[4] = {ZH_FREQUENT[3 * i], ZH_FREQUENT[3 * i + 1], ZH_FREQUENT[3 * i + 2], 0};
    put(l, ch);
}

static void zh_line(Line *l, OcrRng *r) {
    int y = synth_int(r, 2015, 2029), mo = synth_int(r, 1, 12), d = synth_int(r, 1, 28);
    switch (synth_int(r, 0, 13)) {
    case 0: case 1: case 2:  // item, quantity, price
        put(l, SYNTH_PICK(r, ZH_ITEMS));
        if (synth_chance(r, 0.3f)) put(l, SYNTH_PICK(r, ZH_SPECS));
        if (synth_chance(r, 0.5f)) {
            put(l, synth_chance(r, 0.5f) ? " ×" : " ");
            putf(l, "%d", synth_int(r, 1, 12));
        }
        put(l, synth_chance(r, 0.7f) ? "\t" : " ");
        zh_money(l, r, 50, 20000);
        break;
    case 3: case 4:
        put(l, SYNTH_PICK(r, ZH_TOTALS));
        put(l, zh_colon(r));
        zh_money(l, r, 100, 300000);
        break;
    case 5:
        put(l, SYNTH_PICK(r, ZH_COUNTS));
        put(l, zh_colon(r));
        putf(l, "%d", synth_int(r, 1, 300));
        break;
    case 6: {
        put(l, SYNTH_PICK(r, ZH_FIELDS));
        put(l, zh_colon(r));
        if (synth_chance(r, 0.2f)) put(l, "NO.");
        int n = synth_int(r, 6, 14);
        for (int i = 0; i < n; i++) putf(l, "%d", synth_int(r, 0, 9));
        break;
    }
    case 7:
        put(l, SYNTH_PICK(r, ((const char *[]){"日期", "交易时间", "开票日期", "打印时间", ""})));
        if (l->n) put(l, zh_colon(r));
        if (synth_chance(r, 0.5f)) putf(l, "%04d-%02d-%02d", y, mo, d);
        else putf(l, "%d年%d月%d日", y, mo, d);
        if (synth_chance(r, 0.4f)) {
            putf(l, " %02d", synth_int(r, 0, 23));
            putf(l, ":%02d", synth_int(r, 0, 59));
        }
        break;
    case 8:
        put(l, SYNTH_PICK(r, ZH_CITIES));
        put(l, SYNTH_PICK(r, ZH_BRANDS));
        put(l, SYNTH_PICK(r, ZH_STORE_TYPES));
        if (synth_chance(r, 0.3f)) putf(l, "（%s店）", SYNTH_PICK(r, ZH_ROADS));
        break;
    case 9:
        if (synth_chance(r, 0.3f)) putf(l, "地址%s", zh_colon(r));
        PUT_PICK(l, r, ZH_CITIES);
        put(l, "市");
        PUT_PICK(l, r, ZH_DISTRICTS);
        put(l, "区");
        PUT_PICK(l, r, ZH_ROADS);
        PUT_PICK(l, r, ZH_ROAD_SUFFIX);
        putf(l, "%d号", synth_int(r, 1, 999));
        break;
    case 10:
        if (synth_chance(r, 0.5f)) {
            put(l, synth_chance(r, 0.5f) ? "电话" : "手机");
            put(l, zh_colon(r));
            if (synth_chance(r, 0.5f)) {
                putf(l, "0%d", synth_int(r, 10, 999));
                putf(l, "-%08d", synth_int(r, 10000000, 99999999));
            } else {
                putf(l, "1%d", synth_int(r, 3, 9));
                putf(l, "%d****", synth_int(r, 0, 9));
                putf(l, "%04d", synth_int(r, 0, 9999));
            }
        } else {
            put(l, "收银员");
            put(l, zh_colon(r));
            PUT_PICK(l, r, ZH_SURNAMES);
            PUT_PICK(l, r, ZH_GIVEN);
        }
        break;
    case 11:
        put(l, SYNTH_PICK(r, ZH_HEADERS));
        break;
    case 12:
        put(l, SYNTH_PICK(r, ZH_MISC));
        if (synth_chance(r, 0.5f)) {
            put(l, zh_colon(r));
            if (synth_chance(r, 0.5f)) {
                putf(l, "%d:00-", synth_int(r, 6, 10));
                putf(l, "%d:00", synth_int(r, 18, 23));
            }
            else zh_money(l, r, 100, 50000);
        }
        break;
    default: {  // frequent characters, for coverage of the dictionary
        int n = synth_int(r, 2, 12);
        for (int i = 0; i < n; i++) {
            if (i > 0 && synth_chance(r, 0.08f)) put(l, SYNTH_PICK(r, ((const char *[]){"，", "、", "。", " "})));
            zh_random_char(l, r);
        }
        break;
    }
    }
}

// ---- normalisation and the entry point ---------------------------------------------------

// Collapses separator runs to one ' ' (or one '\t' when the run holds a tab), trims the ends.
static void normalise(char *s) {
    char *w = s;
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    while (*p) {
        if (*p == ' ' || *p == '\t') {
            int tab = 0;
            while (*p == ' ' || *p == '\t') tab |= (*p++ == '\t');
            if (*p) *w++ = tab ? '\t' : ' ';
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
}

// Cuts s to at most max code points (whole UTF-8 sequences) and trims trailing separators.
static void truncate_chars(char *s, int max) {
    int count = 0;
    char *p = s;
    while (*p && count < max) {
        uint32_t cp;
        int k = ocr_utf8_decode(p, strlen(p), &cp);
        if (k <= 0) break;
        p += k, count++;
    }
    *p = '\0';
    while (p > s && (p[-1] == ' ' || p[-1] == '\t')) *--p = '\0';
}

void synth_text_generate(char *out, ocr_synth_style_t style, const SynthCorpus *c, OcrRng *rng) {
    Line l;
    for (int attempt = 0; attempt < 16; attempt++) {
        l.n = 0, l.s[0] = '\0';
        if (style == OCR_SYNTH_RECEIPT) receipt_line(&l, rng, c);
        else if (style == OCR_SYNTH_DOCUMENT) document_line(&l, rng, c);
        else zh_line(&l, rng);
        normalise(l.s);
        size_t chars = ocr_utf8_length(l.s, strlen(l.s));
        if (chars >= 1 && chars <= OCR_SYNTH_MAX_CHARS) break;
    }
    normalise(l.s);
    truncate_chars(l.s, OCR_SYNTH_MAX_CHARS);
    if (!l.s[0]) strcpy(l.s, "0");  // unreachable with the generators above; labels are never empty
    OCR_ASSERT(strlen(l.s) < OCR_SYNTH_TEXT_CAP);
    strcpy(out, l.s);
}

// ---- dictionaries ---------------------------------------------------------------------------

ocr_status_t synth_dict_build(char **out, ocr_synth_style_t style) {
    // Worst case: every byte of every table is its own character line.
    size_t cap = 2 * sizeof EN_DICT_ORDER + 3;
    if (style == OCR_SYNTH_ZH) {
        cap += 2 * sizeof ZH_FREQUENT;
        for (int t = 0; t < SYNTH_COUNT(ZH_TABLES); t++)
            for (int i = 0; i < ZH_TABLES[t].n; i++) cap += 2 * strlen(ZH_TABLES[t].items[i]);
    }
    char *d = malloc(cap);
    if (!d) return ocr_set_error(OCR_ERR_OOM, "synth: out of memory for the dictionary");
    size_t n = 0;
    for (const char *p = EN_DICT_ORDER; *p; p++) d[n++] = *p, d[n++] = '\n';
    if (style == OCR_SYNTH_ZH) {
        // Then the non-ASCII characters in order of first appearance.
        const char *srcs[1 + SYNTH_COUNT(ZH_TABLES) * 200];
        int ns = 0;
        for (int t = 0; t < SYNTH_COUNT(ZH_PUNCT); t++) srcs[ns++] = ZH_PUNCT[t];
        srcs[ns++] = ZH_FREQUENT;
        for (int t = 0; t < SYNTH_COUNT(ZH_TABLES); t++)
            for (int i = 0; i < ZH_TABLES[t].n && ns < SYNTH_COUNT(srcs); i++) srcs[ns++] = ZH_TABLES[t].items[i];
        OCR_ASSERT(ns < SYNTH_COUNT(srcs));
        for (int s = 0; s < ns; s++) {
            const char *p = srcs[s];
            size_t len = strlen(p);
            while (len > 0) {
                uint32_t cp;
                int k = ocr_utf8_decode(p, len, &cp);
                OCR_ASSERT(k > 0, "built-in zh text is not UTF-8");
                if (cp >= 0x80) {
                    // Linear search is fine: a few hundred characters, once per run.
                    int seen = 0;
                    for (size_t q = 0; q < n && !seen;) {
                        size_t e = q;
                        while (d[e] != '\n') e++;
                        seen = (e - q == (size_t)k && memcmp(d + q, p, (size_t)k) == 0);
                        q = e + 1;
                    }
                    if (!seen) {
                        memcpy(d + n, p, (size_t)k);
                        n += (size_t)k;
                        d[n++] = '\n';
                    }
                }
                p += k, len -= (size_t)k;
            }
        }
    }
    d[n++] = ' ', d[n++] = '\n';
    d[n] = '\0';
    OCR_ASSERT(n < cap);
    *out = d;
    return OCR_OK;
}

// ---- corpora ----------------------------------------------------------------------------------

typedef struct {
    const char **v;
    int64_t n, cap;
} PtrVec;

static int vec_push(PtrVec *v, const char *s) {
    if (v->n == v->cap) {
        int64_t cap = v->cap ? 2 * v->cap : 1024;
        const char **nv = realloc(v->v, (size_t)cap * sizeof *nv);
        if (!nv) return 0;
        v->v = nv, v->cap = cap;
    }
    v->v[v->n++] = s;
    return 1;
}

static int all_alpha(const char *s) {
    for (; *s; s++)
        if (!isalpha((unsigned char)*s)) return 0;
    return 1;
}

// Splits the word list (in place) into lower-case words and capitalised names.
static int parse_words(char *text, PtrVec *words, PtrVec *names) {
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
        if (len < 2 || len > 12 || !all_alpha(line)) continue;
        int upper_first = isupper((unsigned char)line[0]);
        int rest_lower = 1;
        for (size_t i = 1; i < len; i++) rest_lower &= islower((unsigned char)line[i]) != 0;
        if (!rest_lower) continue;  // acronyms and odd capitals read badly on a line
        if (!(upper_first ? vec_push(names, line) : vec_push(words, line))) return 0;
    }
    return 1;
}

// Fortune files: entries separated by "%" lines; "x\bY" overstrikes keep Y. Tokens are runs of
// printable ASCII; tokens with other bytes, and the "%" separators, are dropped.
static int parse_fortunes(char *text, PtrVec *tokens) {
    char *w = text;
    for (char *p = text; *p; p++) {
        if (*p == '\b') {
            if (w > text) w--;
            continue;
        }
        *w++ = *p;
    }
    *w = '\0';
    char *save = NULL;
    for (char *t = strtok_r(text, " \t\n\r\f\v", &save); t; t = strtok_r(NULL, " \t\n\r\f\v", &save)) {
        size_t len = strlen(t);
        if (len > OCR_SYNTH_MAX_CHARS || (len == 1 && t[0] == '%')) continue;
        int ok = 1;
        for (size_t i = 0; i < len && ok; i++) ok = t[i] > 0x20 && t[i] < 0x7f;
        if (ok && !vec_push(tokens, t)) return 0;
    }
    return 1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void synth_corpus_free(SynthCorpus *c) {
    if (!c) return;
    free((void *)c->words);
    free((void *)c->names);
    free((void *)c->tokens);
    free(c->storage_);
    memset(c, 0, sizeof *c);
}

ocr_status_t synth_corpus_load(SynthCorpus *c, ocr_synth_style_t style, const char *words_path,
                               const char *fortunes_dir) {
    memset(c, 0, sizeof *c);
    if (style == OCR_SYNTH_ZH) return OCR_OK;
    if (!words_path) words_path = "/usr/share/dict/american-english";
    if (!fortunes_dir) fortunes_dir = "/usr/share/games/fortunes";

    // Collect the files: the word list, then the fortune files (names without an extension,
    // sorted, so the token order does not depend on readdir).
    char *paths[64];
    int np = 0, words_found = 0;
    if (ocr_file_exists(words_path) && (paths[np] = strdup(words_path)) != NULL) np++, words_found = 1;
    if (style == OCR_SYNTH_DOCUMENT) {
        DIR *dir = opendir(fortunes_dir);
        if (dir) {
            char *names[64];
            int nn = 0;
            for (struct dirent *e; (e = readdir(dir)) != NULL && nn < 63 - 1;) {
                if (e->d_name[0] == '.' || strchr(e->d_name, '.')) continue;
                if ((names[nn] = strdup(e->d_name)) != NULL) nn++;
            }
            closedir(dir);
            qsort(names, (size_t)nn, sizeof names[0], cmp_str);
            for (int i = 0; i < nn; i++) {
                size_t len = strlen(fortunes_dir) + strlen(names[i]) + 2;
                char *p = malloc(len);
                if (p) snprintf(p, len, "%s/%s", fortunes_dir, names[i]);
                free(names[i]);
                if (p && ocr_file_exists(p)) paths[np++] = p;
                else free(p);
            }
        }
        if (np == 0)
            return ocr_set_error(OCR_ERR_NOT_FOUND,
                                 "synth: the document style needs a text corpus: neither %s (Debian package "
                                 "wamerican) nor fortune files in %s (package fortunes-min) were found",
                                 words_path, fortunes_dir);
    }
    if (np == 0) return OCR_OK;  // receipts fall back to their built-in names

    // Read everything into one buffer (NUL between files) that the pointers index into.
    char *texts[64];
    size_t sizes[64], total = 0;
    ocr_status_t st = OCR_OK;
    int nread = 0;
    for (; nread < np; nread++) {
        st = ocr_read_file(paths[nread], &texts[nread], &sizes[nread]);
        if (st != OCR_OK) break;
        total += sizes[nread] + 1;
    }
    if (st == OCR_OK) {
        c->storage_ = malloc(total + 1);
        if (!c->storage_) st = ocr_set_error(OCR_ERR_OOM, "synth: out of memory for the corpora");
    }
    PtrVec words = {0}, names = {0}, tokens = {0};
    if (st == OCR_OK) {
        size_t off = 0;
        for (int i = 0; i < np && st == OCR_OK; i++) {
            char *t = c->storage_ + off;
            memcpy(t, texts[i], sizes[i]);
            t[sizes[i]] = '\0';
            off += sizes[i] + 1;
            int ok = (i == 0 && words_found) ? parse_words(t, &words, &names) : parse_fortunes(t, &tokens);
            if (!ok) st = ocr_set_error(OCR_ERR_OOM, "synth: out of memory reading %s", paths[i]);
        }
    }
    for (int i = 0; i < nread; i++) free(texts[i]);
    for (int i = 0; i < np; i++) free(paths[i]);
    c->words = words.v, c->num_words = words.n;
    c->names = names.v, c->num_names = names.n;
    c->tokens = tokens.v, c->num_tokens = tokens.n;
    if (st != OCR_OK) {
        synth_corpus_free(c);
        return st;
    }
    if (style == OCR_SYNTH_DOCUMENT && c->num_words == 0 && c->num_tokens == 0) {
        synth_corpus_free(c);
        return ocr_set_error(OCR_ERR_FORMAT, "synth: no usable words in %s or %s", words_path, fortunes_dir);
    }
    return OCR_OK;
}
