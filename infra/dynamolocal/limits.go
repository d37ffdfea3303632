package dynamolocal

import (
	"math/big"
	"strings"

	"github.com/truora/minidyn/types"
)

// DynamoDB's documented limits, enforced by the layer (see the package
// documentation for the messages).
const (
	maxItemSize   = 400 * 1024 // bytes, attribute names included
	maxHashKey    = 2048       // bytes of a partition key value (S or B)
	maxRangeKey   = 1024       // bytes of a sort key value (S or B)
	maxExpression = 4096       // bytes of one expression string
	maxTxActions  = 100        // actions of TransactWriteItems, items of TransactGetItems
	maxTxSize     = 4 << 20    // aggregate item size of TransactWriteItems
	maxBatchWrite = 25         // requests of BatchWriteItem
	maxBatchGet   = 100        // keys of BatchGetItem
	maxPageData   = 1 << 20    // data read by one Query or Scan page
	maxDepth      = 32         // nesting levels of lists and maps
	maxDigits     = 38         // significant digits of a number
)

// itemSize is the size of item as DynamoDB computes it: the UTF-8 length
// of each attribute name plus the size of its value.
func itemSize(item map[string]*types.Item) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

// valueSize is the size of an attribute value: strings their UTF-8
// bytes, binaries their raw bytes, numbers one byte per two significant
// digits plus one, booleans and nulls one byte, sets the sum of their
// elements, lists and maps 3 bytes plus, per element, one byte and its
// size (its name too, in a map). A value minidyn returns without a type
// (an empty list, map or binary it cannot encode) counts as an empty list.
func valueSize(v *types.Item) int {
	switch {
	case v == nil:
		return 0
	case v.S != nil:
		return len(*v.S)
	case v.N != nil:
		return numberSize(*v.N)
	case v.B != nil:
		return len(v.B)
	case v.BOOL != nil, v.NULL != nil:
		return 1
	case v.SS != nil:
		n := 0
		for _, s := range v.SS {
			n += len(*s)
		}
		return n
	case v.NS != nil:
		n := 0
		for _, s := range v.NS {
			n += numberSize(*s)
		}
		return n
	case v.BS != nil:
		n := 0
		for _, b := range v.BS {
			n += len(b)
		}
		return n
	case v.L != nil:
		n := 3
		for _, e := range v.L {
			n += 1 + valueSize(e)
		}
		return n
	case v.M != nil:
		n := 3
		for k, e := range v.M {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 3
}

// significantDigits returns the digits of a number without sign,
// exponent, decimal point, and leading and trailing zeros.
func significantDigits(n string) string {
	n = strings.TrimLeft(n, "+-")
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		n = n[:i]
	}
	n = strings.Replace(n, ".", "", 1)
	return strings.TrimRight(strings.TrimLeft(n, "0"), "0")
}

func numberSize(n string) int {
	return (len(significantDigits(n))+1)/2 + 1
}

// Number range DynamoDB stores: magnitudes from 1E-130 to below 1E+126.
var (
	numberMin = mustFloat("1E-130")
	numberMax = mustFloat("1E+126")
)

func mustFloat(s string) *big.Float {
	f, _, err := big.ParseFloat(s, 10, 512, big.ToNearestEven)
	if err != nil {
		panic(err)
	}
	return f
}

// checkNumber refuses numbers DynamoDB cannot store.
func checkNumber(n string) error {
	f, _, err := big.ParseFloat(n, 10, 512, big.ToNearestEven)
	if err != nil {
		return validation("A value provided cannot be converted into a number")
	}
	if len(significantDigits(n)) > maxDigits {
		return validation("Attempting to store more than 38 significant digits in a Number")
	}
	abs := new(big.Float).Abs(f)
	switch {
	case abs.Sign() == 0:
	case abs.Cmp(numberMax) >= 0:
		return validation("Number overflow. Attempting to store a number with magnitude larger than supported range")
	case abs.Cmp(numberMin) < 0:
		return validation("Number underflow. Attempting to store a number with magnitude smaller than supported range")
	}
	return nil
}

// checkValue refuses values DynamoDB refuses: numbers it cannot store and
// lists or maps nested deeper than 32 levels.
func checkValue(v *types.Item, depth int) error {
	switch {
	case v == nil:
		return nil
	case v.N != nil:
		return checkNumber(*v.N)
	case v.NS != nil:
		for _, s := range v.NS {
			if err := checkNumber(*s); err != nil {
				return err
			}
		}
	case v.L != nil || v.M != nil:
		if depth >= maxDepth {
			return validation("Nesting Levels have exceeded supported limits")
		}
		for _, e := range v.L {
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
		for _, e := range v.M {
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkValues(m map[string]*types.Item) error {
	for _, v := range m {
		if err := checkValue(v, 0); err != nil {
			return err
		}
	}
	return nil
}

// checkExpressionValues checks the values of ExpressionAttributeValues:
// each must be storable and no larger than an item.
func checkExpressionValues(values map[string]*types.Item) error {
	for name, v := range values {
		if err := checkValue(v, 0); err != nil {
			return err
		}
		if valueSize(v) > maxItemSize {
			return validation("ExpressionAttributeValues contains invalid value: Item size has exceeded the maximum allowed size for key %s", name)
		}
	}
	return nil
}

// expr is one named expression of a request, e.g. {"ConditionExpression", "..."}.
type expr struct{ name, text string }

// checkExpressions refuses expressions longer than 4 KB.
func checkExpressions(exprs ...expr) error {
	for _, e := range exprs {
		if len(e.text) > maxExpression {
			return validation("Invalid %s: Expression size has exceeded the maximum allowed size; expression size: %d", e.name, len(e.text))
		}
	}
	return nil
}

// keySize is the size a key value counts against the key limits: the
// bytes of a string or binary; numbers have no such limit.
func keySize(v *types.Item) int {
	switch {
	case v == nil:
		return 0
	case v.S != nil:
		return len(*v.S)
	case v.B != nil:
		return len(v.B)
	}
	return 0
}

func typeOf(v *types.Item) string {
	switch {
	case v == nil:
		return ""
	case v.S != nil:
		return "S"
	case v.N != nil:
		return "N"
	case v.B != nil:
		return "B"
	case v.BOOL != nil:
		return "BOOL"
	case v.NULL != nil:
		return "NULL"
	case v.SS != nil:
		return "SS"
	case v.NS != nil:
		return "NS"
	case v.BS != nil:
		return "BS"
	case v.L != nil:
		return "L"
	case v.M != nil:
		return "M"
	}
	return ""
}

// checkKeyValues refuses a table key whose values DynamoDB refuses: an
// empty string or binary, a partition key over 2 KB, a sort key over
// 1 KB. Missing attributes and wrong types are left to the backend,
// which answers them like DynamoDB.
func (s *schema) checkKeyValues(key map[string]*types.Item) error {
	for _, name := range s.keys.names() {
		v := key[name]
		if (v != nil && v.S != nil && *v.S == "") || (v != nil && v.B != nil && len(v.B) == 0 && v.S == nil && v.N == nil) {
			return validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: %s", name)
		}
	}
	if keySize(key[s.keys.hash]) > maxHashKey {
		return validation("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of%d bytes", maxHashKey)
	}
	if s.keys.rng != "" && keySize(key[s.keys.rng]) > maxRangeKey {
		return validation("One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of %d bytes", maxRangeKey)
	}
	return nil
}

// checkIndexKeys refuses an item whose secondary index key attributes
// DynamoDB refuses: a type other than the attribute definition's, an
// empty string or binary, or a value over the key size limits. An
// attribute the item lacks keeps the item out of that index (sparse).
func (s *schema) checkIndexKeys(item map[string]*types.Item) error {
	for _, name := range s.indexOrder {
		def := s.indexes[name]
		for i, attr := range def.keys.names() {
			v, ok := item[attr]
			if !ok {
				continue
			}
			if want := s.attrTypes[attr]; want != "" && typeOf(v) != want {
				return validation("One or more parameter values were invalid: Type mismatch for Index Key %s Expected: %s Actual: %s IndexName: %s",
					attr, want, typeOf(v), name)
			}
			if (v.S != nil && *v.S == "") || (v.B != nil && len(v.B) == 0 && v.S == nil && v.N == nil) {
				return validation("One or more parameter values are not valid. A value specified for a secondary index key is not supported. "+
					"The AttributeValue for a key attribute cannot contain an empty string value. IndexName: %s, IndexKey: %s", name, attr)
			}
			limit := maxHashKey
			if i == 1 {
				limit = maxRangeKey
			}
			if n := keySize(v); n > limit {
				return validation("One or more parameter values were invalid: Size limit exceeded for Index Key %s Actual Size: %d bytes Max Size: %d bytes IndexName: %s",
					attr, n, limit, name)
			}
		}
	}
	return nil
}

// checkItem refuses an item to put that DynamoDB refuses: see
// checkKeyValues, checkIndexKeys, checkValue, and the 400 KB item size.
func (s *schema) checkItem(item map[string]*types.Item) error {
	if err := s.checkKeyValues(item); err != nil {
		return err
	}
	if err := s.checkIndexKeys(item); err != nil {
		return err
	}
	if err := checkValues(item); err != nil {
		return err
	}
	if itemSize(item) > maxItemSize {
		return validation("Item size has exceeded the maximum allowed size")
	}
	return nil
}

// checkUpdated refuses the item an update produced, like checkItem but
// with UpdateItem's message for the size.
func (s *schema) checkUpdated(item map[string]*types.Item) error {
	if err := s.checkIndexKeys(item); err != nil {
		return err
	}
	if itemSize(item) > maxItemSize {
		return validation("Item size to update has exceeded the maximum allowed size")
	}
	return nil
}

// lengthError is AWS's message for a list parameter over its maximum.
func lengthError(param string, max int) error {
	return validation("1 validation error detected: Value at '%s' failed to satisfy constraint: Member must have length less than or equal to %d", param, max)
}

func emptyError(param string) error {
	return validation("1 validation error detected: Value at '%s' failed to satisfy constraint: Member must have length greater than or equal to 1", param)
}
