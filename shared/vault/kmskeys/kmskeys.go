// Package kmskeys is the vault's key side in AWS: data keys from a KMS key
// (GenerateDataKey, AES_256) and unwrapped by KMS (Decrypt), both with the
// sealed value's context as KMS encryption context, so that CloudTrail
// names the secret each call was for and a wrapped key opens only under
// its own context.
package kmskeys

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// API is the part of the KMS client Keys uses.
type API interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// contextKey is the encryption context's key.
const contextKey = "secret"

// Keys makes and unwraps data keys with one KMS key. It implements
// vault.Keys.
type Keys struct {
	api   API
	keyID string
}

// New returns the Keys of the KMS key keyID (an id, ARN or alias) through
// api.
func New(api API, keyID string) *Keys { return &Keys{api: api, keyID: keyID} }

// Open returns the Keys of keyID with a KMS client for region (at endpoint
// when set: tests). It fails when the AWS configuration cannot be loaded.
func Open(ctx context.Context, region, endpoint, keyID string) (*Keys, error) {
	opts := []func(*awsconfig.LoadOptions) error{}
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("kmskeys: aws config: %w", err)
	}
	client := kms.NewFromConfig(cfg, func(o *kms.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	return New(client, keyID), nil
}

// NewDataKey implements vault.Keys: one GenerateDataKey.
func (k *Keys) NewDataKey(ctx context.Context, secretContext string) (plain, wrapped []byte, err error) {
	out, err := k.api.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{KeyId: aws.String(k.keyID), KeySpec: types.DataKeySpecAes256,
		EncryptionContext: map[string]string{contextKey: secretContext}})
	if err != nil {
		return nil, nil, fmt.Errorf("kms GenerateDataKey: %w", err)
	}
	return out.Plaintext, out.CiphertextBlob, nil
}

// Unwrap implements vault.Keys: one Decrypt, naming the key so that a
// wrapped key of another KMS key is refused.
func (k *Keys) Unwrap(ctx context.Context, wrapped []byte, secretContext string) ([]byte, error) {
	out, err := k.api.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: wrapped, KeyId: aws.String(k.keyID),
		EncryptionContext: map[string]string{contextKey: secretContext}})
	if err != nil {
		return nil, fmt.Errorf("kms Decrypt: %w", err)
	}
	return out.Plaintext, nil
}
