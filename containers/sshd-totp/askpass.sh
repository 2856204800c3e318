#!/bin/sh
# SSH_ASKPASS for the TOTP test sshd: answers its "Verification code" prompt with the
# code of this moment (oathtool --totp), and refuses any other question (a host key to
# accept, a password), so that a test never answers what it did not mean to.
#   SSH_ASKPASS=containers/sshd-totp/askpass.sh SSH_ASKPASS_REQUIRE=force \
#   HPCBRIDGE_TEST_TOTP_SECRET=/etc/hpcbridge-sshd-totp/hpcbtest ssh ...
case ${1:-} in
    *[Vv]erification\ code*) ;;
    *) printf 'askpass.sh: not a verification code prompt: %s\n' "${1:-}" >&2; exit 1 ;;
esac
secret_file=${HPCBRIDGE_TEST_TOTP_SECRET:?set HPCBRIDGE_TEST_TOTP_SECRET to the secret file}
read -r secret < "$secret_file" || exit 1
exec oathtool --totp -b "$secret"
